"""Hypothesis strategies for JSON-shaped values holding what a database refuses (NUL,
lone surrogates, NaN, infinities), what only looks like it (an emoji, an escaped
backslash) and what `json.dumps` cannot write alone (tuples, non-string keys): the
cleaning rule and the writer's encoders are both held to their long ways on these."""

from __future__ import annotations

from hypothesis import strategies as st

texts = st.text(max_size=12) | st.sampled_from(
    ["", " ", "\x00", "a\x00b", "\ud800", "x\udfff", "é", "😀", "\\u0000", "\u2028", "NaN"]
)
# Pieces joined: two surrogate code points side by side (JSON text would decode their
# escapes as one character, so only values, never JSON text, are built from these) and
# backslashes before `u0000`.
joined_texts = st.lists(
    st.sampled_from(["a", "é", "\x00", "\ud800", "\udfff", "😀", "\\", "u0000", "\n"])
).map("".join)


def scalars_of(text: st.SearchStrategy[str]) -> st.SearchStrategy[object]:
    return (
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=True, allow_infinity=True)
        | text
    )


def json_like_of(text: st.SearchStrategy[str]) -> st.SearchStrategy[object]:
    return st.recursive(
        scalars_of(text),
        lambda children: (
            st.lists(children, max_size=4)
            | st.lists(children, max_size=3).map(tuple)
            | st.dictionaries(text | st.integers(0, 3) | st.none(), children, max_size=4)
        ),
        max_leaves=16,
    )


scalars = scalars_of(texts)
json_like = json_like_of(texts)
