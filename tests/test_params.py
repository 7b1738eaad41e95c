"""The shared parameter table: strict parsing for the CLI, lenient parsing for URLs."""


import pytest

from core.errors import InputError
from core.params import parse_lenient, parse_strict
from core.params.pipeline import PIPELINE


def test_strict_parses_and_types_values():
    v = parse_strict(PIPELINE, {"p": "8", "m": "32", "tf": "1.5", "schedule": "ZB-H1", "recompute": "true"})
    assert (v["p"], v["m"], v["tf"], v["schedule"], v["recompute"]) == (8, 32, 1.5, "zb-h1", True)
    assert v["tb"] == 2.0  # untouched keys keep their default


@pytest.mark.parametrize(
    "key,raw,needle",
    [
        ("p", "0", "out of range"),
        ("p", "65", "out of range"),
        ("m", "-1", "out of range"),
        ("m", "2.5", "whole number"),
        ("tf", "nan", "finite"),
        ("tf", "inf", "finite"),
        ("schedule", "<script>", "not allowed"),
        ("p", "x" * 500, "too long"),
        ("stage_costs", "1,2,abc", "not valid"),
    ],
)
def test_strict_rejects_with_a_clear_message(key, raw, needle):
    with pytest.raises(InputError, match=needle):
        parse_strict(PIPELINE, {key: raw})


def test_unknown_key_is_an_error_for_the_cli():
    with pytest.raises(InputError, match="unknown parameter"):
        parse_strict(PIPELINE, {"pp": "4"})


def test_lenient_falls_back_with_one_notice_per_bad_value():
    values, notices = parse_lenient(PIPELINE, {"p": "999", "m": ["4", "16"], "tf": "NaN", "zzz": "1"})
    assert values["p"] == 4 and values["tf"] == 1.0
    assert values["m"] == 16  # repeated keys: the last one wins
    assert len(notices) == 2 and all("default" in n for n in notices)


def test_float_lists_are_bounded():
    assert parse_strict(PIPELINE, {"stage_costs": "1, 1.5"})["stage_costs"] == (1.0, 1.5)
    with pytest.raises(InputError):
        parse_strict(PIPELINE, {"stage_costs": ",".join(["1"] * 600)})
    assert parse_strict(PIPELINE, {"stage_costs": ""})["stage_costs"] == ()


def test_a_set_of_choices_reads_from_text_or_a_list_in_its_own_order():
    from core.params.memory import ACTIVATIONS
    from ui.shared.url_state import format_value
    spec = ACTIVATIONS["recompute_modules"]  # Megatron-LM's --recompute-modules
    assert spec.parse("moe_act, layernorm,moe_act") == ("layernorm", "moe_act")  # repeats dropped, spec order
    assert spec.parse(["MOE", "core_attn"]) == ("core_attn", "moe") == spec.parse("core_attn,moe")
    assert spec.parse("") == () and spec.parse([]) == ()  # none: selective recompute re-runs nothing
    for value in (spec.default, ("layernorm", "moe_act"), ()):
        assert spec.parse(format_value(spec, value)) == value
    for bad in ("core_attn,attention", "x" * 300, 3):
        with pytest.raises(InputError):
            spec.parse(bad)
