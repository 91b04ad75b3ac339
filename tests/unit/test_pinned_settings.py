"""The settings of later phases share one declared base and one codec (core.pinned_settings)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, ClassVar

from curator_array.core.pinned_settings import PinnedSettings
from curator_array.run.phases import PHASES


@dataclass(frozen=True)
class ToySettings(PinnedSettings):
    digest: str
    path: str | None = None
    colours: tuple[str, ...] = ()
    names: dict[str, str] = field(default_factory=dict)
    strict: bool = False  # added later: runs pinned before it wrote what False writes

    UNPINNED: ClassVar[tuple[str, ...]] = ("path",)
    LATER: ClassVar[dict[str, Any]] = {"strict": False}
    READ_BACK: ClassVar[dict[str, Any]] = {}
    OPTION_DEFAULTS: ClassVar[dict[str, Any]] = {"names": ()}


def test_the_codec_pins_fields_in_order_leaves_out_paths_and_later_fields_at_their_old_value():
    toy = ToySettings("abc", "/data/x", ("red", "blue"), {"a": "1"})
    assert toy.to_json() == {"digest": "abc", "colours": ["red", "blue"], "names": {"a": "1"}}
    assert list(toy.to_json()) == ["digest", "colours", "names"]
    strict = ToySettings("abc", strict=True)
    assert strict.to_json()["strict"] is True


def test_what_is_pinned_reads_back_equal_tuples_included():
    toy = ToySettings("abc", "/data/x", ("red",), {"a": "1"}, strict=True)
    back = ToySettings.from_json(json.loads(json.dumps(toy.to_json())))
    assert back == ToySettings("abc", None, ("red",), {"a": "1"}, True)
    assert isinstance(back.colours, tuple)
    assert ToySettings.from_json({"digest": "abc"}) == ToySettings("abc")


def test_option_defaults_come_from_the_fields_unless_an_option_gives_them_in_another_form():
    defaults = ToySettings.field_defaults()
    assert defaults["colours"] == () and defaults["strict"] is False and defaults["digest"] is None
    assert defaults["names"] == ()


def test_every_phase_that_brings_settings_declares_them_on_the_base_with_a_default_for_each_setting_option():
    bringing = [phase for phase in PHASES if phase.settings_type is not None]
    assert len(bringing) >= 6
    for phase in bringing:
        assert issubclass(phase.settings_type, PinnedSettings), phase.name
        assert phase.settings_type.from_options is not PinnedSettings.from_options, phase.name
        defaults = phase.settings_type.field_defaults()
        missing = [option.field for option in phase.options
                   if option.field not in defaults and option.name != phase.settings_key]  # a bare on-switch
        assert not missing, (phase.name, missing)
