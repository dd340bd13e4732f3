"""Learned prefill in the runtime: a program's engine calls recorded per site, its prompts
learned, and their verified prefixes warmed as soon as the values they hold are known.

A wrapped app that runs its own code (LangGraph graph, LlamaIndex chat engine, workflow, ...)
keeps one `ProgramModel` (`Session.learner`); each call of it is a `RunRecorder` attached to
its `WrappedRun`. The runtime's program calls (`Programs`) tell the recorder what the run
produced (every LLM call's text, every search's passages) and which prompt each LLM call sent;
the adapter gives the run's input when it starts. The pure decisions (`WarmDecisions`, which
the session fills with `accel.passes.learned_prefill`) write each call site's prompt as static
text and slots over those values and check it on later runs; this module decides when to send
a prefix-cache warm-up (`WarmupOp`, pass 3's request: block-aligned token ids, `max_tokens=1`)
of a site's verified prefix: once its values are all there and before the run makes the call,
so vLLM has prefilled it while the run was busy elsewhere. `Programs.warm` sends it.

Never a changed request: the program's own requests go out as they would. A site is warmed only
when most finished runs made the call; only up to where the last run repeated its pattern (the
rest is learned again from that run); only while a later value of its prompt is still to come,
or when the call usually comes well after its last value (a loop's later rounds, a node behind
other LLM calls), since otherwise the warm-up would race the call; and only while the real
requests find the warmed tokens cached (`cached_tokens`; `MAX_MISSES` in a row stop the site).
A warm-up is speculative work: the warm-ups one arrival of values makes ready are sent only
while the LLM engine has spare capacity (`SpareGate`). Warm-ups are tasks of the run: `end()`
cancels those still in flight. The pass name in the app's `WrapOptions.disabled_passes`
switches it off (the session then gives no learner).
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Container, Mapping
from dataclasses import dataclass
from typing import Protocol

from accel.engines.errors import EngineError
from accel.ir.dynamic import LearnedPrompt, Prompt, Site
from accel.scope import WrappedRun
from accel.types import Locate

log = logging.getLogger("accel.runtime.programs.learned")

WARM_SHARE = 0.5
"""A site is warmed when at least this share of the program's finished runs made its call."""
MAX_MISSES = 3
"""Warm-ups in a row whose tokens the real request did not find cached stop a site's warming."""
MIN_LAG_S = 0.05
"""A site whose whole prompt is known is warmed only if its call usually comes at least this
long after its last value (otherwise the warm-up would race the call and prefill it twice)."""
LAG_WEIGHT = 0.3

class WarmDecisions(Protocol):
    """The pure decisions of learned prefill (`accel.passes.learned_prefill`; the runtime may
    not import the passes, so the session hands the module in)."""

    def learn(self, prompt: Prompt, values: Mapping[str, str]) -> LearnedPrompt: ...
    def reproduced(self, learned: LearnedPrompt, prompt: Prompt, values: Mapping[str, str]) -> int: ...
    def ready(self, learned: LearnedPrompt, upto: int, available: Container[str]) -> int: ...
    def waiting(self, learned: LearnedPrompt, available: Container[str]) -> bool: ...
    def worth_warming(self, learned: LearnedPrompt, n: int) -> bool: ...


@dataclass(frozen=True)
class Warm:
    """One warm-up to send: a site's first `parts` prompt parts, on LLM engine `engine` (the
    runtime's name for it)."""

    site: Site
    learned: LearnedPrompt
    engine: str
    parts: int


Warmer = Callable[["RunRecorder", list[Warm], dict[str, str]], "concurrent.futures.Future[None]"]
"""Sends one arrival's warm-ups of a run on the runtime's loop (`Programs.warm`, bridged by the
session); the future is the run's task, cancelled when the run ends."""


@dataclass
class SiteModel:
    """What the runs taught about one LLM call site."""

    learned: LearnedPrompt
    engine: str
    verified: int = 0
    """Leading parts of `learned` the last run repeated (a site's first pattern is trusted
    whole at once, so the runs right after the first already gain)."""
    runs: int = 0
    multi: bool = False
    """The call was made more than once in one run (a loop, a fan-out): not warmed."""
    lag_s: float = -1.0
    """How long after the last value its prompt holds the call is usually made (a moving
    average; -1 before the first run): a call made long after (a loop's later rounds, a node
    behind other LLM calls) is worth warming even once its whole prompt is known."""
    misses: int = 0
    stopped: str | None = None
    relearned: int = 0
    warmups: int = 0
    warmed_tokens: int = 0
    hits: int = 0
    busy: int = 0
    """Warm-ups not sent because the LLM engine had no spare capacity."""
    short: int = 0
    """Warm-ups not sent because their prefix was too short to pay for a request."""
    late: int = 0
    """Calls made while their warm-up was still on its way."""


class ProgramModel:
    """One wrapped app's sites, learned over its runs (shared by concurrent runs); the
    `ProgramLearner` the adapters hold (`accel.types`)."""

    def __init__(self, name: str, decisions: WarmDecisions, warmer: Warmer) -> None:
        self.name = name
        self.decisions = decisions
        self.warmer = warmer
        self.sites: dict[Site, SiteModel] = {}
        self.finished = 0
        self.failed_warmups = 0
        self._lock = threading.Lock()

    def start(self, run: WrappedRun, locate: Locate | None, values: dict[str, str]) -> Callable[[], None]:
        """Record `run` (its recorder is attached to it); `values` are the text leaves of its
        input. The returned function ends the recording."""
        recorder = RunRecorder(self, run, locate)
        run.recorder = recorder
        recorder.add_values(values)
        return recorder.end

    def observe(self, site: Site, prompt: Prompt, engine: str, values: dict[str, str]) -> list[str]:
        """Learn `site`'s prompt from its first run; check every later run against it. The
        value names the prompt holds."""
        lp = self.decisions
        with self._lock:
            model = self.sites.get(site)
            if model is None:  # trusted up to its end until a run says otherwise
                learned = lp.learn(prompt, values)
                self.sites[site] = SiteModel(learned, engine, verified=len(learned.flat_parts))
                return learned.slots()
            model.engine = engine
            model.verified = lp.reproduced(model.learned, prompt, values)
            if model.verified == len(model.learned.flat_parts):
                return model.learned.slots()
            # the pattern held only so far: the part that held is what the next runs may warm;
            # the rest is learned again from this run
            model.learned = lp.learn(prompt, values)
            model.relearned += 1
            if model.relearned == 1:
                log.info("%s: the prompt of %s repeated %d part(s) of its pattern; learning the rest again",
                         self.name, site, model.verified)
            return model.learned.slots()

    def lag(self, site: Site, seconds: float) -> None:
        """A run made `site`'s call `seconds` after the last value its prompt holds arrived."""
        with self._lock:
            model = self.sites.get(site)
            if model is not None:
                model.lag_s = seconds if model.lag_s < 0 else (1 - LAG_WEIGHT) * model.lag_s + LAG_WEIGHT * seconds

    def targets(self) -> list[tuple[Site, SiteModel]]:
        """Sites to warm in a run: verified, usually called, not stopped."""
        with self._lock:
            if not self.finished:
                return []
            return [(site, m) for site, m in self.sites.items()
                    if not m.multi and m.stopped is None and m.verified and m.runs / self.finished >= WARM_SHARE
                    and self.decisions.worth_warming(m.learned, m.verified)]

    def count(self, site: Site, counter: str, n: int = 1) -> None:
        """Add `n` to one of a site's counters (`late`, `busy`, `short`, `warmups`, `warmed_tokens`)."""
        with self._lock:
            model = self.sites.get(site)
            if model is not None:
                setattr(model, counter, getattr(model, counter) + n)

    def warm_up_failed(self) -> None:
        with self._lock:
            self.failed_warmups += 1

    def cache_report(self, site: Site, warmed: int, cached: int) -> None:
        """The real request of a site warmed with `warmed` tokens found `cached` in the cache."""
        with self._lock:
            model = self.sites.get(site)
            if model is None:
                return
            if cached >= warmed:
                model.hits += 1
                model.misses = 0
                return
            model.misses += 1
            if model.misses >= MAX_MISSES and model.stopped is None:
                model.stopped = f"{MAX_MISSES} warm-ups in a row not found in the prefix cache"
                log.warning("%s: stopped warming %s: %s", self.name, site, model.stopped)

    def finish(self, called: Counter[Site]) -> None:
        with self._lock:
            self.finished += 1
            for site, times in called.items():
                model = self.sites.get(site)
                if model is not None:
                    model.runs += 1
                    model.multi = model.multi or times > 1

    def explain(self) -> list[str]:
        with self._lock:
            if not self.sites:
                return [f"learned prefill: nothing learned yet ({self.finished} runs finished)"]
            lines = [f"learned prefill: {len(self.sites)} LLM call site(s) over {self.finished} finished run(s)"]
            for site, m in sorted(self.sites.items()):
                lines.append(f"  {site}: {m.learned.describe()}")
                lines.append(f"    {self._state_of(m)}; {m.warmups} warm-up(s), {m.warmed_tokens} tokens, {m.hits} found cached"
                             + (f", {m.late} late (the call came first)" if m.late else "")
                             + (f", {m.busy} skipped (engine busy)" if m.busy else "")
                             + (f", {m.short} skipped (prefix too short to pay)" if m.short else "")
                             + (f", learned again {m.relearned}x" if m.relearned else ""))
            if self.failed_warmups:
                lines.append(f"  warm-ups that failed (no effect on runs): {self.failed_warmups}")
            return lines

    def _state_of(self, model: SiteModel) -> str:
        if model.stopped:
            return f"stopped: {model.stopped}"
        if model.multi:
            return "not warmed: called more than once per run"
        if not self.decisions.worth_warming(model.learned, model.verified):
            return "not warmed: no run value in its verified prefix"
        return f"warmed through part {model.verified} of {len(model.learned.flat_parts)}"


class RunRecorder:
    """One run's values, calls and warm-ups."""

    def __init__(self, model: ProgramModel, run: WrappedRun, locate: Locate | None) -> None:
        self.model = model
        self.run = run
        self._locate = locate
        self._values: dict[str, str] = {}
        self._called: Counter[Site] = Counter()
        self._ordinals: Counter[tuple[str, str, str]] = Counter()
        self._visits: dict[str, list[str]] = {}
        self._warmed_parts: dict[Site, int] = {}
        self._warmed_tokens: dict[Site, int] = {}
        self._at_request: dict[Site, int] = {}
        self._warming: Counter[Site] = Counter()
        self._futures: set[concurrent.futures.Future[None]] = set()
        self._arrived: dict[str, float] = {}
        self._started = time.perf_counter()
        self._ended = False
        self._lock = threading.Lock()

    # ---- what the program's calls report ----------------------------------------------------

    def site(self, kind: str) -> Site:
        """The site of the call the calling code is making now."""
        where = self._locate() if self._locate is not None else None
        node, task = where or ("", "")
        with self._lock:
            visits = self._visits.setdefault(node, [])
            if task not in visits:
                visits.append(task)
            visit = visits.index(task)
            ordinal = self._ordinals[(node, task, kind)]
            self._ordinals[(node, task, kind)] += 1
        return Site(node, visit, kind, ordinal)

    def add_values(self, values: dict[str, str]) -> None:
        if not values:
            return
        now = time.perf_counter()
        with self._lock:
            self._values.update(values)
            self._arrived.update(dict.fromkeys(values, now))
        self._warm_ready()

    def llm_request(self, site: Site, prompt: Prompt | None, engine: str) -> None:
        now = time.perf_counter()
        with self._lock:
            self._called[site] += 1
            values, arrived = dict(self._values), dict(self._arrived)
            late = self._warming[site] > 0
            if site in self._warmed_tokens:
                self._at_request[site] = self._warmed_tokens[site]
        if late:
            self.model.count(site, "late")
        if prompt is not None:
            slots = self.model.observe(site, prompt, engine, values)
            # how long after its last value came the run made this call
            self.model.lag(site, now - max((arrived.get(name, self._started) for name in slots), default=self._started))

    def llm_response(self, site: Site, text: str | None, cached_tokens: int | None) -> None:
        with self._lock:
            warmed = self._at_request.pop(site, None)
        if warmed and cached_tokens is not None:
            self.model.cache_report(site, warmed, cached_tokens)
        if text:
            self.add_values({site.source(): text})

    def results(self, site: Site, texts: list[str], shown: list[str]) -> None:
        """A search's passages (`texts`), and how the documents the component made of them
        print (`shown`: `str` of a list of LangChain documents writes each one's `repr`, as
        prompts built from state often do)."""
        found = {site.source(i): text for i, text in enumerate(texts) if text}
        found.update({f"{site.source(i)}.repr": text for i, text in enumerate(shown)})
        self.add_values(found)

    def end(self) -> None:
        """The run is over: warm-ups still in flight are cancelled; the model counts its calls."""
        with self._lock:
            if self._ended:
                return
            self._ended = True
            futures, self._futures = self._futures, set()
            called = Counter(self._called)
        for future in futures:
            future.cancel()
        self.model.finish(called)

    # ---- what `Programs.warm` asks and reports ----------------------------------------------

    def called(self, site: Site) -> bool:
        with self._lock:
            return site in self._called

    def warmed(self, site: Site, tokens: int) -> None:
        with self._lock:
            self._warmed_tokens[site] = max(tokens, self._warmed_tokens.get(site, 0))
        self.model.count(site, "warmups")
        self.model.count(site, "warmed_tokens", tokens)

    def warming_done(self, warms: list[Warm]) -> None:
        with self._lock:
            self._warming.subtract(w.site for w in warms)

    # ---- warming -------------------------------------------------------------------------

    def _warm_ready(self) -> None:
        lp = self.model.decisions
        launches = []
        with self._lock:
            if self._ended:
                return
            for site, model in self.model.targets():
                if site in self._called:
                    continue
                if not lp.waiting(model.learned, self._values) and model.lag_s < MIN_LAG_S:
                    continue  # everything is known and the call usually follows at once: a warm-up would race it
                parts = lp.ready(model.learned, model.verified, self._values)
                if parts > self._warmed_parts.get(site, 0) and lp.worth_warming(model.learned, parts):
                    self._warmed_parts[site] = parts
                    launches.append(Warm(site, model.learned, model.engine, parts))
            values = dict(self._values) if launches else {}
        if launches:
            self._launch(launches, values)

    def _launch(self, warms: list[Warm], values: dict[str, str]) -> None:
        """One task of the run sends `warms` (the prefixes one arrival of values made ready)."""
        with self._lock:
            self._warming.update(w.site for w in warms)
        future = self.model.warmer(self, warms, values)
        with self._lock:
            if self._ended:
                future.cancel()
                return
            self._futures.add(future)
        future.add_done_callback(self._done)

    def _done(self, future: concurrent.futures.Future[None]) -> None:
        with self._lock:
            self._futures.discard(future)
        if future.cancelled():
            return
        err = future.exception()
        if err is not None:
            self.model.warm_up_failed()
            level = logging.DEBUG if isinstance(err, EngineError) else logging.WARNING
            log.log(level, "%s: a warm-up failed (the run is not affected): %r", self.model.name, err)
