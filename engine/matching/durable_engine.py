"""The durable-rules back end: runs a compiled rule pack in the C engine `durable_rules_engine`
directly (no `durable.lang`, no `engine.Host`, no background threads) and returns the same
firings as the Python reference (`PythonMatcher`). Translation and limits: durable_compile.

Per request and per ruleset (shard), under the ruleset's lock: one `assert_facts` batch
(shadow copies for negated types first, explicit collision-free ids, the `__end__` sentinel
last), a drain of every pending action with `start_action_for_state` /
`complete_and_start_action` that only records frames, then `delete_state` once the sentinel has
fired (deleting a session in which no action ran crashes the engine). A session whose cleanup
failed is never deleted or reused; the ruleset moves on to the next id of a fixed pool.
"""
from __future__ import annotations

import itertools
import json
import re
import threading
import weakref
from dataclasses import dataclass
from typing import Sequence

import durable_rules_engine as _engine

from precdx.errors import PrecdxError
from precdx.facts import NONFINITE_SUFFIX, Fact, match_dict
from precdx.matching.base import Firing
from precdx.matching.durable_compile import (ALPHA_BUDGET, END_RULE, END_TYPE, NEG_PREFIX, NUMERIC,
                                             EngineRule, Program, TypePlan, compile_program)
from precdx.matching.durable_serial import (FACT_IDS, MAX_SIDS, SESSION_IDS, fact_ids, format_number,
                                            format_string)
from precdx.rulepack.compiler import CompiledPack

_RULESET_SERIAL = itertools.count(1)
_CODE = re.compile(r"error code:?\s*(\d+)")
_ENGINE_ERRORS = {
    101: "out of memory (too many live sessions?)",
    201: "could not parse a value", 202: "could not parse a string", 203: "could not parse a number",
    204: "could not parse an object", 205: "could not parse an array",
    302: "a fact has too many properties",
    303: "a fact satisfies too many alpha conditions at once",
    304: "too many facts in one rule frame",
    309: "session not found", 311: "a referenced property is missing",
    312: "operation not supported on these values",
}


def _describe(exc: BaseException) -> str:
    m = _CODE.search(str(exc))
    if not m:
        return f"{type(exc).__name__}: {exc}"
    code = int(m.group(1))
    return f"error {code} ({_ENGINE_ERRORS.get(code, 'see durable rules.h')})"


# ---------------------------------------------------------------- request encoding
@dataclass
class _Batch:
    """One request's facts as engine records without the session id."""

    positive: list[tuple[int, str]]  # (fact index, record text after the id)
    shadow: list[str]
    size: int                         # number of facts in the request

    def text(self, sid: str) -> str:
        n_shadow = len(self.shadow)
        ids = fact_ids(self.size + n_shadow + 1)
        head = '{"sid":"' + sid + '","id":"'
        parts = [head + ids[self.size + k] + body for k, body in enumerate(self.shadow)]
        parts += [head + ids[i] + body for i, body in self.positive]
        parts.append(self.sentinel(sid))
        return "[" + ",".join(parts) + "]"

    def sentinel(self, sid: str) -> str:
        end_id = fact_ids(self.size + len(self.shadow) + 1)[self.size + len(self.shadow)]
        return '{"sid":"' + sid + '","id":"' + end_id + '","type":"' + END_TYPE + '"}'


class _Encoder:
    """Facts -> engine records: only the fields the pack tests, numbers as doubles, non-finite
    numbers as their `__nonfinite` flag only, regex results as boolean flags."""

    def __init__(self, plans: dict[str, TypePlan]) -> None:
        self.plans = plans
        self.fields = {t: [(name, format_string(name), name + NONFINITE_SUFFIX if kind in NUMERIC else None, kind)
                           for name, kind in p.fields.items()] for t, p in plans.items()}
        self.type_heads = {t: '","type":' + format_string(t) for t in plans}
        self.shadow_heads = {t: '","type":' + format_string(NEG_PREFIX + t) for t in plans}

    def encode(self, facts: Sequence[Fact]) -> _Batch:
        positive: list[tuple[int, str]] = []
        shadow: list[str] = []
        for i, fact in enumerate(facts):
            plan = self.plans.get(fact.type)
            if plan is None:
                continue  # no rule looks at this type
            d = match_dict(fact)
            parts: list[str] = []
            for name, quoted, flag, kind in self.fields[plan.fact_type]:
                if name in d:
                    parts.append("," + quoted + ":" + self._value(i, plan.fact_type, name, kind, d[name]))
                elif flag is not None and flag in d:  # a non-finite number: only its flag
                    parts.append("," + format_string(flag) + ":" + format_string(str(d[flag])))
            for flag in plan.regex_flags:
                value = d.get(flag.field)
                if isinstance(value, str) and flag.pattern.fullmatch(value):
                    parts.append(f',"{flag.name}":true')
            body = "".join(parts) + "}"
            if plan.positive:
                positive.append((i, self.type_heads[plan.fact_type] + body))
            if plan.shadow:
                shadow.append(self.shadow_heads[plan.fact_type] + body)
        return _Batch(positive, shadow, len(facts))

    @staticmethod
    def _value(i: int, fact_type: str, name: str, kind: str, value) -> str:
        try:
            if kind in NUMERIC:
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    raise TypeError(f"a {kind} field holds {value!r}")
                return format_number(value)
            if kind == "string" and isinstance(value, str):
                return format_string(value)
            if kind == "boolean" and isinstance(value, bool):
                return "true" if value else "false"
            raise TypeError(f"a {kind} field holds {value!r}")
        except (TypeError, OverflowError, ValueError) as exc:
            raise PrecdxError(f"fact #{i} ({fact_type}.{name}): {exc}", hint="use --engine python") from None


# ---------------------------------------------------------------- one C ruleset
class _Ruleset:
    def __init__(self, name: str, rules: list[EngineRule], text: str) -> None:
        self.name = name
        self.rules = {r.name: r for r in rules}
        self.rule_ids = sorted({r.rule_id for r in rules})
        self.lock = threading.Lock()
        self.retired: list[str] = []
        self._pool = iter(SESSION_IDS.names[:MAX_SIDS])
        self.sid: str | None = next(self._pool)
        self.used: list[str] = [self.sid]
        self.handle: int | None = None
        try:
            self.handle = _engine.create_ruleset(name, text)
        except Exception as exc:
            raise PrecdxError(f"the durable engine rejected ruleset {name} (rules {self._rules_text()}): "
                              f"{_describe(exc)}", hint="run with --engine python", exit_code=3) from None

    def _rules_text(self) -> str:
        ids = self.rule_ids
        return ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")

    def _fail(self, what: str, exc: BaseException | None) -> PrecdxError:
        detail = f": {_describe(exc)}" if exc is not None else ""
        return PrecdxError(f"durable engine {what} in ruleset {self.name} (rules {self._rules_text()}){detail}",
                           hint="run with --engine python", exit_code=3)

    def _retire(self, sid: str) -> None:
        """Never touch this session again: deleting a half-cleaned session can crash the engine."""
        self.retired.append(sid)
        self.sid = next(self._pool, None)
        if self.sid is not None:
            self.used.append(self.sid)

    def run(self, batch: _Batch, out: set[Firing]) -> None:
        with self.lock:
            if self.handle is None:
                raise PrecdxError("the durable matcher was closed", exit_code=3)
            sid = self.sid
            if sid is None:
                raise self._fail(f"has no clean session left ({len(self.retired)} retired)", None)
            rejected: BaseException | None = None
            messages: list[dict] = []
            stage = "failed while collecting rule firings"
            clean = False
            try:
                try:
                    state = _engine.assert_facts(self.handle, batch.text(sid))[1]
                except Exception as exc:  # noqa: BLE001 - the C module raises plain errors
                    rejected = exc  # the batch stopped early: make sure the sentinel is in
                    state = _engine.assert_fact(self.handle, batch.sentinel(sid))[1]
                if not self._drain(state, messages):
                    raise self._fail("did not fire the end-of-request sentinel", rejected)
                stage = "could not delete a session"
                _engine.delete_state(self.handle, sid)
                clean = True
            except PrecdxError:
                raise
            except Exception as exc:  # noqa: BLE001
                raise self._fail(stage, exc) from None
            finally:
                if not clean:  # also on KeyboardInterrupt: the session may hold this request's facts
                    self._retire(sid)
            if rejected is not None:
                raise self._fail("rejected the facts", rejected)
        index = FACT_IDS.index
        for message in messages:
            for rule_name, payload in message.items():
                if rule_name == END_RULE:
                    continue
                rule = self.rules[rule_name]
                aliases = rule.aliases
                for frame in payload if isinstance(payload, list) else (payload,):
                    binding = tuple(sorted((aliases[k], index[f["id"]]) for k, f in frame.items() if k in aliases))
                    out.add(Firing(rule.rule_id, rule.alternative, binding))

    def _drain(self, state, messages: list[dict]) -> bool:
        """Run every pending action of the session (recording its frames); True once the
        sentinel rule has fired."""
        ended = False
        result = _engine.start_action_for_state(self.handle, state)
        text = result[1] if result else None
        while text:
            message = json.loads(text)
            ended = ended or END_RULE in message
            messages.append(message)
            text = _engine.complete_and_start_action(self.handle, state)
        return ended

    def live_sessions(self) -> int:
        """Sessions the engine still holds (asks the engine; a clean request leaves none)."""
        with self.lock:
            live = 0
            for sid in self.used if self.handle is not None else ():
                try:
                    _engine.get_state(self.handle, sid)
                except Exception:  # noqa: BLE001 - error 309: no such session
                    continue
                live += 1
            return live

    def close(self) -> None:
        with self.lock:
            if self.handle is not None and not self.retired:
                _engine.delete_ruleset(self.handle)
            # A ruleset with retired sessions is left allocated: deleting it would free them.
            self.handle = None


def _firing_order(f: Firing) -> tuple:
    return (f.rule_id, f.alternative, f.bindings)


def _close_all(rulesets: list[_Ruleset]) -> None:
    for rs in rulesets:
        rs.close()


class DurableMatcher:
    """`Matcher` over the durable-rules C engine; equal to `PythonMatcher` on every input."""

    name = "durable"

    def __init__(self, pack: CompiledPack, *, alpha_budget: int = ALPHA_BUDGET, program: Program | None = None) -> None:
        """`program`: `compile_program(pack, alpha_budget=alpha_budget)` when already at hand."""
        self.pack = pack
        self.program: Program = program if program is not None else compile_program(pack, alpha_budget=alpha_budget)
        self._encoder = _Encoder(self.program.plans)
        serial = next(_RULESET_SERIAL)
        self._rulesets: list[_Ruleset] = []
        try:
            for k, rules in enumerate(self.program.shards):
                self._rulesets.append(_Ruleset(f"precdx_{pack.version or 'pack'}_v{serial}_{k}", rules,
                                               self.program.texts[k]))
        except PrecdxError:
            _close_all(self._rulesets)
            raise
        self._finalizer = weakref.finalize(self, _close_all, self._rulesets)
        self._finalizer.atexit = False

    @property
    def shard_count(self) -> int:
        return len(self._rulesets)

    def live_sessions(self) -> int:
        """Sessions the engine still holds across this matcher's rulesets (0 between requests
        unless a cleanup failed)."""
        return sum(rs.live_sessions() for rs in self._rulesets)

    def retired_sessions(self) -> int:
        return sum(len(rs.retired) for rs in self._rulesets)

    def run(self, facts: Sequence[Fact]) -> list[Firing]:
        batch = self._encoder.encode(list(facts))
        out: set[Firing] = set()
        for ruleset in self._rulesets:
            ruleset.run(batch, out)
        return sorted(out, key=_firing_order)  # the dataclass order, without its slow __lt__

    def close(self) -> None:
        self._finalizer()
