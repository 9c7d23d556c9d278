"""The slice identity and the one codec of its label: reversible for any keys and values."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seer_metrics.slices.groups import pair_label, slice_label
from seer_metrics.slices.identity import (
    ALL_SLICE,
    SliceIdentity,
    SliceLabelError,
    display_label,
)

# Any Unicode text, and text built from the codec's own characters (and `all`).
TRICKY = st.text(alphabet=st.sampled_from([",", "=", "\\", "a", "l", " ", "×", '"']), max_size=8)
PARTS = st.one_of(st.text(max_size=12), TRICKY, st.sampled_from(["", "all", "=", ",", "\\"]))
IDENTITIES = st.lists(st.tuples(PARTS, PARTS), max_size=3, unique_by=lambda pair: pair[0]).map(
    lambda pairs: SliceIdentity(tuple(pairs))
)
ORDINARY = st.text(
    alphabet=st.characters(exclude_characters=",=\\", exclude_categories=("Cs",)), max_size=10
)


@settings(max_examples=500)
@given(IDENTITIES)
def test_decoding_a_label_gives_back_its_identity_exactly(identity: SliceIdentity) -> None:
    label = identity.label
    assert SliceIdentity.decode(label) == identity
    assert (label == ALL_SLICE) == identity.is_all
    assert identity.arity == len(identity.pairs) and identity.keys == tuple(
        key for key, _ in identity.pairs
    )


@settings(max_examples=300)
@given(IDENTITIES, IDENTITIES)
def test_two_identities_never_share_a_label(first: SliceIdentity, second: SliceIdentity) -> None:
    assert (first.label == second.label) == (first == second)


@given(st.lists(st.tuples(ORDINARY, ORDINARY), min_size=1, max_size=2, unique_by=lambda p: p[0]))
def test_ordinary_keys_and_values_keep_the_labels_they_always_had(pairs) -> None:
    identity = SliceIdentity(tuple(pairs))
    assert identity.label == ",".join(f"{key}={value}" for key, value in pairs)
    assert identity.label == (slice_label(*pairs[0]) if len(pairs) == 1 else pair_label(*pairs))


def test_special_characters_are_escaped_and_one_key_stays_one_key() -> None:
    tenant = SliceIdentity.of(("tenant", "acme,env=prod"))
    assert tenant.label == "tenant=acme\\,env=prod"
    assert not tenant.is_intersection and tenant.keys == ("tenant",)
    # the escaped `=` of a value is read too (a label written by hand)
    assert SliceIdentity.decode("tenant=acme\\,env\\=prod") == tenant
    assert SliceIdentity.of(("k=eq", "v1")).label == "k\\=eq=v1"
    assert SliceIdentity.decode("k\\=eq=v1").pairs == (("k=eq", "v1"),)
    assert SliceIdentity.decode("q=a=b").pairs == (("q", "a=b"),)
    assert SliceIdentity.of(("a\\b", "c\\")).label == "a\\\\b=c\\\\"
    # `all` fixes no key; a key or value `all` is an ordinary pair
    assert slice_label("all", "x") == "all=x"
    assert SliceIdentity.of(("k", "all")).label == "k=all"
    assert SliceIdentity.of(("", "")).label == "="
    assert SliceIdentity.decode("all") == SliceIdentity()


@pytest.mark.parametrize("label", ["", "prod", "env=prod,", "env=prod,beta", "a=b\\", "a=\\x"])
def test_a_text_the_codec_cannot_have_written_is_refused(label: str) -> None:
    with pytest.raises(SliceLabelError, match="slice label"):
        SliceIdentity.decode(label)


def test_a_slice_fixes_each_key_once() -> None:
    with pytest.raises(SliceLabelError, match="each key once"):
        SliceIdentity.decode("env=a,env=b")


def test_parents_and_narrower_slices_come_from_the_pairs() -> None:
    pair = SliceIdentity.of(("ключ", "значение"), ("drop table x;--", "1"))
    first, second = pair.components
    assert pair.is_intersection and pair.arity == 2
    assert pair.parents == (first, second)
    assert first.parents == (SliceIdentity(),) and SliceIdentity().parents == ()
    assert pair.is_narrower_than(first) and pair.is_narrower_than(SliceIdentity())
    assert not first.is_narrower_than(pair) and not pair.is_narrower_than(pair)
    assert not SliceIdentity().is_narrower_than(SliceIdentity())
    other = SliceIdentity.of(("ключ", "другое"), ("drop table x;--", "1"))
    assert not other.is_narrower_than(first)


def test_the_display_quotes_what_is_special_and_is_the_label_otherwise() -> None:
    assert display_label("env=prod,feature_flag=v2") == "env=prod,feature_flag=v2"
    assert display_label("env=prod,feature_flag=v2", " × ") == "env=prod × feature_flag=v2"
    assert display_label("all") == "all"
    assert display_label("tenant=acme\\,env=prod") == 'tenant="acme,env=prod"'
    assert display_label("k\\=eq=v1") == '"k=eq"=v1'
    assert display_label("drop table x;--=1") == "drop table x;--=1"
    assert SliceIdentity.of(("k", "")).display() == 'k=""'
    assert SliceIdentity.of(("k", "a\nb")).display() == 'k="a\\nb"'
    # a text that is no label is shown as it is
    assert display_label("slice_metrics") == "slice_metrics"


def test_the_key_and_value_columns_escape_the_parts_of_a_pair_only() -> None:
    assert (SliceIdentity().key_column, SliceIdentity().value_column) == ("all", "all")
    one = SliceIdentity.of(("tenant", "acme,env=prod"))
    assert (one.key_column, one.value_column) == ("tenant", "acme,env=prod")
    pair = SliceIdentity.of(("env", "prod"), ("tenant", "acme,env=prod"))
    assert (pair.key_column, pair.value_column) == ("env,tenant", "prod,acme\\,env=prod")
    assert SliceIdentity.of(("a\\b", "1"), ("c", "2")).key_column == "a\\\\b,c"


def test_slices_may_overlap_unless_a_key_is_fixed_to_another_value() -> None:
    decode = SliceIdentity.decode
    assert decode("tenant=acme").may_overlap(decode("env=prod,feature_flag=v1"))
    assert decode("tenant=acme").may_overlap(decode("env=prod,tenant=acme"))
    assert decode("all").may_overlap(decode("tenant=acme"))
    assert not decode("tenant=acme").may_overlap(decode("env=prod,tenant=initech"))
    assert not decode("tenant=acme\\,env=prod").may_overlap(decode("tenant=acme"))


def test_slices_cross_when_they_share_events_with_neither_inside_the_other() -> None:
    decode = SliceIdentity.decode
    assert decode("env=prod").crosses(decode("tenant=acme"))
    assert decode("env=prod,feature_flag=v2").crosses(decode("feature_flag=v2,tenant=acme"))
    assert not decode("env=prod").crosses(decode("env=prod,tenant=acme"))  # inside
    assert not decode("env=prod,tenant=acme").crosses(decode("env=prod"))
    assert not decode("env=prod").crosses(decode("env=prod"))  # the same slice
    assert not decode("env=prod").crosses(decode("env=staging"))  # no events shared
    assert not decode("all").crosses(decode("tenant=acme"))
