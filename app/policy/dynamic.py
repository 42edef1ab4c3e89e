"""The engine-facing Dynamic Draft policy: prompt-token count in, speculative settings and a decision record out.

How the engine uses it:

1. When a model pair is loaded, build the policy once::

       result = TableStore().load_active(fingerprint)      # LoadResult: table or a visible reason
       policy = DynamicDraftPolicy.from_load_result(result, fingerprint, default=configured_settings)

   Construction checks the fingerprint (exact match, else every decision says ``stale_table``) and precomputes,
   per prompt-token segment, the setting to run and a record template, so a decision is a bisect and a few reads.
2. After tokenizing each request (the final, templated prompt), call::

       settings, record = policy.decide(prompt_tokens, request_override, caps, content_class=cls)

   ``request_override`` is the request's ``speculative.*`` fields (None if it had none); ``caps`` is the engine's
   draft allocation (``DraftCaps``); ``content_class`` the request's class (app.policy.content_class, decided
   once per request from the templated prompt; None decides on the context-only frontier). Run generation with
   ``settings``; put ``record.to_dict()`` in the response metadata. ``settings`` always respects ``caps``.
3. ``policy.with_options(enabled=..., force=...)`` gives a policy sharing the precomputed plans, for UI toggles.

Decision reasons (``DecisionRecord.reason``; ``applied`` says whether DD's choice is what runs):

* ``table_row``: the calibrated range's fastest safe row that clears the noise margin (may be the static setting).
* ``fallback_static``: a faster row existed in the range but within noise of the best static setting: static runs.
* ``fallback_plain``: the range's (or class's) prompts ran plain decoding at least as fast as the best static
  setting, and no faster row beat plain beyond noise: plain runs (app.policy.frontier, "Per-range choice").
* ``fallback_held_out``: a row beat the baseline on the range's prompts together, but not on prompts left out of
  its choice (cross-validation over the calibration's prompts, app.policy.held_out): the baseline runs.
* ``capped``: the caps (depth cap, or no draft model loaded) excluded the table's choice; DD re-selected among the
  measured rows the caps allow (never an unmeasured, clamped setting), with the same rules.
* ``out_of_range``: the prompt is outside every calibrated range. Below the smallest range: that range's choice
  (short prompts behave like the shortest calibrated one). Above the largest range, or in a gap between ranges:
  the best static setting, the only setting with evidence at every calibrated context; aggressive settings
  tend to lose their edge as context grows, so extrapolating the last range's winner is not safe.
* ``forced``: force mode; the request carried speculative fields, they were ignored and DD's choice runs.
* ``override``: the request's speculative fields win (not force mode); DD did not apply. Clamped to caps.
* ``no_table``: no usable table (missing, corrupt or unreadable); the engine default runs.
* ``stale_table``: a table exists but its fingerprint differs from the engine's; the engine default runs.
* ``disabled``: DD is switched off; the request's fields (if any) or the engine default run, clamped to caps.

* ``catch_up``: the table's choice needs a draft model whose KV lacks most of the prompt (a conversation's first
  turn, a new document): prefilling it first (``record.catch_up_ms``, at the draft's measured prefill speed) would
  cost more than that row gains over the best choice without the draft model within ``max_tokens``, so that choice
  runs (``record.passed_over`` names the one it replaced; in force mode the reason stays ``forced`` and
  ``passed_over`` says the same). The table's rows are timed with a warm draft KV (the
  calibration runs its candidates one after another on one prompt), so they cannot price this themselves. See
  ``DynamicDraftPolicy.weigh_catch_up``.

``record.capped`` is also set whenever caps changed what would otherwise have run (e.g. a clamped override).

Content classes (``record.class_basis`` says which frontier decided):

* ``class_row``: the request's class has calibrated rows for this prompt length; its own frontier decided (with
  the reasons above, against the same best static setting).
* ``subclass_row``: the request's sub-class (copy_edit's ``near_copy`` / ``additive``, app.policy.edit_kind) has
  calibrated rows for this prompt length; its own frontier decided. Without them the sub-class falls back to its
  class's rows (``class_row``), then to the context-only rows (``class_fallback``), with the same rules.
* ``class_fallback``: the class has no evidence in this range (not calibrated for that class, or not at this
  length): the context-only frontier decided, exactly as for a request without a class.
* ``context_only``: no class was given.
* ``not_applied``: DD's table did not decide (override, disabled, no or stale table).
"""

from __future__ import annotations

import time
from bisect import bisect_right
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal, TypedDict, get_args

from app.policy.content_class import CONTENT_CLASSES, SUBCLASSES, TABLE_CLASSES
from app.policy.fingerprint import Fingerprint
from app.policy.frontier import DEFAULT_MIN_GAIN, RangeChoice, StaticChoice, class_choices, frontier_choices
from app.policy.table import FrontierTable, normalize
from app.speculative.registry import POOL, needs_draft_model
from app.speculative.settings import PLAIN, SpecSettings

if TYPE_CHECKING:
    from app.policy.store import LoadResult

Reason = Literal[
    "table_row",
    "fallback_static",
    "fallback_plain",
    "fallback_held_out",
    "override",
    "forced",
    "capped",
    "no_table",
    "stale_table",
    "disabled",
    "out_of_range",
    "catch_up",
]
ClassBasis = Literal["subclass_row", "class_row", "class_fallback", "context_only", "not_applied"]
CLASS_BASES: tuple[ClassBasis, ...] = get_args(ClassBasis)
REASONS: tuple[Reason, ...] = get_args(Reason)

_now_ns = time.perf_counter_ns
_new = object.__new__


@dataclass(frozen=True)
class DraftCaps:
    """The engine's draft allocation: DD may lower the depth per request but never exceed `n_max`.

    n_max: the configured (allocated) draft depth, 0..64; draft_loaded: whether a draft GGUF is loaded; missing:
    registered sources that need no draft GGUF yet cannot run here (the MTP head of a file without MTP layers).
    """

    n_max: int
    draft_loaded: bool
    missing: frozenset[str] = frozenset()

    def _runs(self, source: str) -> bool:
        return source not in self.missing and (self.draft_loaded or not needs_draft_model(source))

    def __post_init__(self) -> None:
        if not 0 <= self.n_max <= 64:
            raise ValueError(f"DraftCaps.n_max must be in 0..64, got {self.n_max}")

    def allows(self, setting: SpecSettings) -> bool:
        """Whether the setting runs as measured under these caps."""
        if setting.is_plain:
            return True
        return setting.n_max <= self.n_max and self._runs(setting.source)

    def clamp(self, setting: SpecSettings) -> SpecSettings:
        """Make an explicit setting (override, engine default) fit: lower depth to the cap; no draft model → plain."""
        if setting.is_plain:
            return PLAIN
        if self.n_max == 0 or not self._runs(setting.source):
            return PLAIN
        if setting.n_max > self.n_max:
            return setting.with_(n_max=self.n_max, n_min=min(setting.n_min, self.n_max))
        return setting


class DecisionDict(TypedDict):
    """`DecisionRecord.to_dict()`, key for key: the record as a response's `dynamic_draft` carries it (the engine may
    add keys: app.engine.types.DynamicDraftRecord). The fields mean what DecisionRecord's docstring says."""

    applied: bool
    reason: Reason
    prompt_tokens: int
    selected: dict[str, Any]  # SpecSettings.to_dict()
    selected_label: str  # SpecSettings.label()
    decision_us: float
    table_id: str | None
    ctx_lo: int | None
    ctx_hi: int | None
    static_fallback: bool
    capped: bool
    content_class: str | None
    class_basis: ClassBasis
    class_cue: str | None
    content_subclass: str | None
    subclass_cue: str | None
    catch_up_ms: float | None
    passed_over: str | None
    default_basis: str | None


@dataclass(frozen=True)
class DecisionRecord:
    """What DD decided for one request; goes into the generation metadata via `to_dict()`.

    applied: DD's table-based choice is what runs; reason: see the module docstring; prompt_tokens: the count
    decided on; selected: the settings that run; decision_us: perf_counter_ns time of the decision itself
    (lookup, not building this record); table_id / ctx_lo / ctx_hi: the table and calibrated range [lo, hi) whose
    choice was used (None when none was); static_fallback: the selection is the table's best static setting;
    capped: the caps changed what would otherwise have run. content_class: the request's class (None when none
    was given); class_basis: which frontier decided (module docstring); class_cue: what made the detector pick
    the class (app.policy.content_class.Cue), when the caller passed it; content_subclass / subclass_cue: the
    request's sub-class and the word that decided it (app.policy.edit_kind), None when it has none.
    catch_up_ms: the draft model's estimated prefill before its first draft, when DD weighed it (weigh_catch_up);
    passed_over: the label of the table's choice that the catch-up ruled out (reason "catch_up"), else None.
    default_basis: why the engine default is what it is ("mtp default": the model's own head drafts, "plain
    default", "configured default", ...), on a record where that default runs (no or stale table, DD off); else None.
    """

    applied: bool
    reason: Reason
    prompt_tokens: int
    selected: SpecSettings
    decision_us: float
    table_id: str | None = None
    ctx_lo: int | None = None
    ctx_hi: int | None = None
    static_fallback: bool = False
    capped: bool = False
    content_class: str | None = None
    class_basis: ClassBasis = "context_only"
    class_cue: str | None = None
    content_subclass: str | None = None
    subclass_cue: str | None = None
    catch_up_ms: float | None = None
    passed_over: str | None = None
    default_basis: str | None = None

    def to_dict(self) -> DecisionDict:
        return {
            "applied": self.applied,
            "reason": self.reason,
            "prompt_tokens": self.prompt_tokens,
            "selected": self.selected.to_dict(),
            "selected_label": self.selected.label(),
            "decision_us": self.decision_us,
            "table_id": self.table_id,
            "ctx_lo": self.ctx_lo,
            "ctx_hi": self.ctx_hi,
            "static_fallback": self.static_fallback,
            "capped": self.capped,
            "content_class": self.content_class,
            "class_basis": self.class_basis,
            "class_cue": self.class_cue,
            "content_subclass": self.content_subclass,
            "subclass_cue": self.subclass_cue,
            "catch_up_ms": self.catch_up_ms,
            "passed_over": self.passed_over,
            "default_basis": self.default_basis,
        }


def _record_from(
    template: dict[str, Any], prompt_tokens: int, decision_us: float, cue: str | None = None, sub_cue: str | None = None
) -> DecisionRecord:
    # Hot path: a frozen dataclass __init__ pays object.__setattr__ per field (~1-2 us for ten fields in CPython).
    # Filling __dict__ from a template precomputed at load gives an identical, equal record at a third of the cost.
    rec: DecisionRecord = _new(DecisionRecord)
    d = rec.__dict__
    d.update(template)
    d["prompt_tokens"] = prompt_tokens
    d["decision_us"] = decision_us
    d["class_cue"] = cue
    d["subclass_cue"] = sub_cue
    return rec


Lane = tuple[tuple[SpecSettings, ...], tuple[dict[str, Any], ...], tuple[float | None, ...]]
"""One class's (or sub-class's) per-segment outcomes: (selected settings, record templates, the selected row's
measured median tok/s or None), index = bisect_right(bounds, n)."""


def catch_up_pays(catch_up_ms: float, tokens: int, tps: float, alt_tps: float) -> bool:
    """Whether a setting at `tps` tok/s that first spends `catch_up_ms` still finishes `tokens` tokens before one at
    `alt_tps`. `tokens` is the request's max_tokens, an upper bound (a reply may stop sooner), so a catch-up the
    whole budget would pay back is never refused."""
    if tps <= 0.0 or alt_tps <= 0.0:
        return True
    return catch_up_ms + tokens / tps * 1000.0 < tokens / alt_tps * 1000.0


@dataclass(frozen=True)
class _Plan:
    """Per-segment outcomes for one caps value, per class (None: the context-only frontier)."""

    lanes: dict[str | None, Lane]
    static: StaticChoice | None
    class_choices: dict[str, tuple[RangeChoice, ...]]


class DynamicDraftPolicy:
    """Selects speculative settings per request from a calibrated frontier table (see the module docstring)."""

    def __init__(
        self,
        table: FrontierTable | None,
        fingerprint: Fingerprint | None,
        *,
        default: SpecSettings = PLAIN,
        enabled: bool = True,
        force: bool = False,
        min_gain: float = DEFAULT_MIN_GAIN,
        load_message: str = "",
        default_basis: str | None = None,
    ) -> None:
        """table: the loaded table (None → `no_table`); fingerprint: the engine's current one (a mismatch →
        `stale_table`); default: what the engine runs when DD does not apply, and why (`default_basis`, said in
        those records); min_gain: relative noise floor."""
        self.default = default
        self.default_basis = default_basis
        self.enabled = enabled
        self.force = force
        self.min_gain = min_gain
        self.load_message = load_message
        self.stale_fields: list[str] = []
        self.table: FrontierTable | None = None
        self.unavailable: Literal["no_table", "stale_table"] | None = None
        if table is None:
            self.unavailable = "no_table"
        elif fingerprint is None or not table.fingerprint.matches(fingerprint):
            self.unavailable = "stale_table"
            self.stale_fields = table.fingerprint.differences(fingerprint) if fingerprint else ["fingerprint"]
        else:
            self.table = table
        self._bounds: list[int] = []
        self._base: _Plan | None = None
        self._plans: dict[DraftCaps, _Plan] = {}
        self._last: tuple[DraftCaps | None, _Plan | None] = (None, None)
        if self.table is not None:
            every = [*self.table.ranges, *(r for rs in self.table.class_ranges.values() for r in rs)]
            self._bounds = sorted({b for rng in every for b in rng})
            self._base = self._compile(None)

    @classmethod
    def from_load_result(cls, result: LoadResult, fingerprint: Fingerprint, **options: Any) -> DynamicDraftPolicy:
        """Build from `TableStore.load_active()`; a stale table is passed through so the reason is `stale_table`."""
        return cls(result.table, fingerprint, load_message=result.message, **options)

    def with_options(self, *, enabled: bool | None = None, force: bool | None = None) -> DynamicDraftPolicy:
        """A copy with DD switched on/off or force mode changed, sharing the precomputed plans."""
        new: DynamicDraftPolicy = _new(DynamicDraftPolicy)
        new.__dict__.update(self.__dict__)
        if enabled is not None:
            new.enabled = enabled
        if force is not None:
            new.force = force
        return new

    # -- precomputation -------------------------------------------------------------------------------------------

    def _compile(self, caps: DraftCaps | None) -> _Plan:
        table = self.table
        assert table is not None
        allowed = caps.allows if caps is not None else (lambda _s: True)
        static, choices = frontier_choices(table, self.min_gain, allowed)
        per_class = class_choices(table, static, self.min_gain, allowed)
        base = self._base
        bounds = self._bounds

        lanes: dict[str | None, Lane] = {}
        for klass in (None, *TABLE_CLASSES):
            # A sub-class's chain: its own rows, then its class's rows, then the context-only rows.
            parent = SUBCLASSES.get(klass) if klass is not None else None
            own = per_class.get(klass, []) if klass is not None else []
            inherited = per_class.get(parent, []) if parent is not None else []
            selected: list[SpecSettings] = []
            templates: list[dict[str, Any]] = []
            speeds: list[float | None] = []
            for i in range(len(bounds) + 1):
                # Segment i covers [bounds[i-1], bounds[i]); segment 0 is below the smallest bound, the last above.
                lo = bounds[i - 1] if i > 0 else float("-inf")
                hi = bounds[i] if i < len(bounds) else float("inf")
                basis: ClassBasis = "context_only" if klass is None else "class_fallback"
                choice = _covering(own, lo, hi)
                if choice is not None:
                    basis = "class_row" if parent is None else "subclass_row"
                elif (choice := _covering(inherited, lo, hi)) is not None:
                    basis = "class_row"
                else:
                    choice = _covering(choices, lo, hi)
                setting, reason, c_lo, c_hi, is_static, tps = _segment(table, static, choices, choice, lo, hi)
                capped = base is not None and base.lanes[klass][0][i] != setting
                if capped and reason != "out_of_range":
                    reason = "capped"
                selected.append(setting)
                speeds.append(tps)
                templates.append(
                    {
                        "applied": True,
                        "reason": reason,
                        "selected": setting,
                        "table_id": table.table_id,
                        "ctx_lo": c_lo,
                        "ctx_hi": c_hi,
                        "static_fallback": is_static,
                        "capped": capped,
                        "content_class": parent or klass,
                        "class_basis": basis,
                        "content_subclass": klass if parent is not None else None,
                    }
                )
            lanes[klass] = (tuple(selected), tuple(templates), tuple(speeds))
        return _Plan(lanes, static, {k: tuple(v) for k, v in per_class.items()})

    def _plan_for(self, caps: DraftCaps) -> _Plan:
        plan = self._plans.get(caps)
        if plan is None:
            plan = self._compile(caps)
            self._plans[caps] = plan
        self._last = (caps, plan)  # one tuple, so a concurrent reader never pairs caps with another plan
        return plan

    # -- decisions ------------------------------------------------------------------------------------------------

    def decide(
        self,
        prompt_tokens: int,
        request_override: SpecSettings | None,
        caps: DraftCaps,
        content_class: str | None = None,
        class_cue: str | None = None,
        subclass: str | None = None,
        subclass_cue: str | None = None,
    ) -> tuple[SpecSettings, DecisionRecord]:
        """The settings to run for a tokenized prompt of `prompt_tokens` of class `content_class` (one of
        CONTENT_CLASSES, or None for the context-only frontier) and sub-class `subclass` (one of SUBCLASSES, of
        that class, or None), and the record of why; `class_cue` / `subclass_cue` (what made the detectors
        choose them) are copied into the record.

        Pass the same DraftCaps object on every call while the engine's allocation is unchanged: the plan for the
        last caps is found by identity; a new (even equal) object costs a dict lookup, a new value a recompile.
        """
        t0 = _now_ns()
        if request_override is None and self.enabled and self._base is not None:
            last = self._last
            plan = last[1] if last[0] is caps and last[1] is not None else self._plan_for(caps)
            lane = plan.lanes.get(content_class if subclass is None else subclass)
            if lane is not None and (subclass is None or SUBCLASSES.get(subclass) == content_class):
                i = bisect_right(self._bounds, prompt_tokens)
                selected = lane[0][i]
                t1 = _now_ns()
                return selected, _record_from(lane[1][i], prompt_tokens, (t1 - t0) / 1000.0, class_cue, subclass_cue)
        return self._decide_other(
            t0, prompt_tokens, request_override, caps, content_class, class_cue, subclass, subclass_cue
        )

    def select(
        self, prompt_tokens: int, caps: DraftCaps, content_class: str | None = None, subclass: str | None = None
    ) -> SpecSettings:
        """The core lookup alone (no override handling, no record): DD's choice, or the clamped default."""
        if not self.enabled or self._base is None:
            return caps.clamp(self.default)
        last = self._last
        plan = last[1] if last[0] is caps and last[1] is not None else self._plan_for(caps)
        return plan.lanes[_lane(content_class, subclass)][0][bisect_right(self._bounds, prompt_tokens)]

    def expected_tps(
        self, prompt_tokens: int, caps: DraftCaps, content_class: str | None = None, subclass: str | None = None
    ) -> float | None:
        """The measured median tok/s of the row `select` picks (None without a table or a measured row)."""
        if not self.enabled or self._base is None:
            return None
        plan = self._plan_for(caps)
        return plan.lanes[_lane(content_class, subclass)][2][bisect_right(self._bounds, prompt_tokens)]

    def weigh_catch_up(
        self,
        settings: SpecSettings,
        record: DecisionRecord,
        caps: DraftCaps,
        without_draft: DraftCaps,
        catch_up_ms: float,
        max_tokens: int,
    ) -> tuple[SpecSettings, DecisionRecord]:
        """DD's decision once the draft model's catch-up is known: `catch_up_ms` of prefill before its first draft
        (text its KV lacks, priced at its measured speed). When the table's row, paying that, would finish
        `max_tokens` later than DD's measured choice under `without_draft` (caps with no draft model), that choice
        runs with reason "catch_up". Only a table-based choice of a fixed draft-model setting is weighed: an override
        is the user's, and the pool weighs the catch-up itself at every step (app/speculative/adaptive.py)."""
        if (
            not record.applied
            or settings.source == POOL
            or not needs_draft_model(settings.source)
            or catch_up_ms <= 0.0
        ):
            return settings, record
        t0 = _now_ns()
        n, cls, sub = record.prompt_tokens, record.content_class, record.content_subclass
        weighed = replace(record, catch_up_ms=round(catch_up_ms, 3))
        tps = self.expected_tps(n, caps, cls, sub)
        alt_tps = self.expected_tps(n, without_draft, cls, sub)
        if tps is None or alt_tps is None or catch_up_pays(catch_up_ms, max_tokens, tps, alt_tps):
            return settings, weighed
        alt, alt_record = self.decide(n, None, without_draft, cls, record.class_cue, sub, record.subclass_cue)
        spent = (_now_ns() - t0) / 1000.0
        return alt, replace(
            alt_record,
            reason="forced" if record.reason == "forced" else "catch_up",  # force mode still says it ignored fields
            decision_us=record.decision_us + spent,
            catch_up_ms=weighed.catch_up_ms,
            passed_over=settings.label(),
        )

    def _decide_other(
        self,
        t0: int,
        prompt_tokens: int,
        override: SpecSettings | None,
        caps: DraftCaps,
        content_class: str | None = None,
        class_cue: str | None = None,
        subclass: str | None = None,
        subclass_cue: str | None = None,
    ) -> tuple[SpecSettings, DecisionRecord]:
        lane_name = _lane(content_class, subclass)
        if override is not None:
            override = normalize(override)
        explicit = override if override is not None else self.default
        reason: Reason
        if not self.enabled:
            reason = "disabled"
        elif override is not None and not self.force:
            reason = "override"
        elif self._base is None:
            reason = self.unavailable or "no_table"
            explicit = self.default
        else:
            plan = self._plan_for(caps)
            i = bisect_right(self._bounds, prompt_tokens)
            lane = plan.lanes[lane_name]
            selected = lane[0][i]
            t1 = _now_ns()
            tmpl = dict(lane[1][i])
            if override is not None:  # force mode: the request's fields are ignored
                tmpl["reason"] = "forced"
            return selected, _record_from(tmpl, prompt_tokens, (t1 - t0) / 1000.0, class_cue, subclass_cue)
        selected = caps.clamp(explicit)
        t1 = _now_ns()
        record = DecisionRecord(
            applied=False,
            reason=reason,
            prompt_tokens=prompt_tokens,
            selected=selected,
            decision_us=(t1 - t0) / 1000.0,
            table_id=self.table.table_id if self.table is not None else None,
            capped=selected != normalize(explicit),
            content_class=content_class,
            class_basis="not_applied",
            class_cue=class_cue,
            content_subclass=subclass,
            subclass_cue=subclass_cue,
            default_basis=self.default_basis if override is None else None,
        )
        return selected, record

    # -- introspection (UI, reports) ------------------------------------------------------------------------------

    @property
    def status(self) -> Literal["active", "no_table", "stale_table", "disabled"]:
        if not self.enabled:
            return "disabled"
        return self.unavailable or "active"

    def static_choice(self, caps: DraftCaps | None = None) -> StaticChoice | None:
        """The best static setting of the table (under `caps` if given)."""
        plan = self._base if caps is None or self._base is None else self._plan_for(caps)
        return plan.static if plan is not None else None

    def class_range_choices(self, caps: DraftCaps | None = None) -> dict[str, tuple[RangeChoice, ...]]:
        """DD's choice per calibrated range of each class that has rows (under `caps` if given)."""
        plan = self._base if caps is None or self._base is None else self._plan_for(caps)
        return dict(plan.class_choices) if plan is not None else {}


def _lane(content_class: str | None, subclass: str | None = None) -> str | None:
    """The lane of a class name DD knows (or None), or of its sub-class; anything else is a caller's bug, said
    plainly."""
    if content_class is not None and content_class not in CONTENT_CLASSES:
        raise ValueError(f"unknown content class {content_class!r} (known: {', '.join(CONTENT_CLASSES)})")
    if subclass is None:
        return content_class
    if SUBCLASSES.get(subclass) != content_class or content_class is None:
        known = ", ".join(f"{s} (of {c})" for s, c in SUBCLASSES.items())
        raise ValueError(f"unknown sub-class {subclass!r} of {content_class!r} (known: {known})")
    return subclass


def _covering(found: list[RangeChoice], lo: float, hi: float) -> RangeChoice | None:
    """The choice whose range covers the whole segment [lo, hi), if any."""
    return next((c for c in found if c.ctx_lo <= lo and hi <= c.ctx_hi), None)


def _segment(
    table: FrontierTable,
    static: StaticChoice | None,
    choices: list[RangeChoice],
    choice: RangeChoice | None,
    lo: float,
    hi: float,
) -> tuple[SpecSettings, Reason, int | None, int | None, bool, float | None]:
    """What a segment runs: (setting, reason, its range, whether it is the static setting, its measured tok/s)."""
    if choice is not None:
        return choice.selected, choice.reason, choice.ctx_lo, choice.ctx_hi, choice.is_static, choice.selected_tps
    if hi <= choices[0].ctx_lo:
        first = choices[0]  # below the smallest range: that range's choice
        return first.selected, "out_of_range", first.ctx_lo, first.ctx_hi, first.is_static, first.selected_tps
    # Above the largest range, or in a gap between ranges: the best static setting, at its speed where it was last
    # measured: the nearest calibrated range below (an estimate).
    setting = static.setting if static else PLAIN
    below = [r for r in table.context_rows if r.ctx_hi <= lo and r.setting == setting and r.safe]
    tps = max(below, key=lambda r: r.ctx_hi).median_tps if below else None
    return setting, "out_of_range", None, None, static is not None, tps
