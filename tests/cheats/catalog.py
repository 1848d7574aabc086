"""Every class of cheat of issue 55, and the planted implementations that commit it, one
row each: the class, the family, the implementation (``MODULE:ATTR`` in tests/helpers/),
the command that fails it and the words its failure must say. ``tests/cheats/
test_catalog.py`` runs every row (``check --profile ci``, or ``bench`` for the benchmark's
class) and the pristine kernels through the same commands; adding a cheat is one row.

A row's ``words`` must be in the first line of its failure report (for a FLAKY report, in
the failing run's line that follows it); ``notes``, anywhere in the output (what the check's
header says of the implementation's own declarations). ``per_push``: the cheapest row of
each class runs on every push; the others are marked nightly (the nightly recipe runs
them). docs/kernel-ran.md ("What a PASS proves, and what it cannot") is this table in prose,
with the classes the harness does not name and the families where a class does not apply.
"""

from __future__ import annotations

import dataclasses

#: The classes (issue 55's items), each with what fails it.
CLASSES: dict[str, str] = {
    "result unused": "poisoning every kernel's result (item 1-2)",
    "math outside": "the arithmetic measured outside every kernel body (item 3)",
    "otherwise when counted": "one traced program, counted and run (item 4)",
    "otherwise when eager": "a direct call on concrete arrays, compared bit for bit with "
                            "the traced program (principle 2)",
    "ghost branch": "claimed-sizes, traced at the claimed sizes (item 5)",
    "values never drawn": "the comparison on the values the strategy draws now (item 6)",
    "memoized or constant": "the comparison on several data draws per program (item 6)",
    "lower precision": "the comparison's tolerance or calibrated bound (item 6)",
    "nondeterministic": "the bitwise rerun inside matches-reference (item 7)",
    "declared exclusion": "only the user narrows a check (item 8)",
    "declared fallback": "only the user accepts a fallback (item 8)",
    "flaky": "the FLAKY verdict (item 9)",
    "bench fooled": "bench's judged timed results (item 10)",
    "otherwise unobserved": "the implementation's source read for observers, clocks, "
                            "counters and backend branches (principle 2)",
}

#: Where a class does not apply to a family of the catalog, and why.
NOT_APPLICABLE: dict[tuple[str, str], str] = {
    ("declared exclusion", "gpu-softmax"): "gpu-softmax declares no optional feature, so "
                                           "there is nothing to declare oneself without",
    ("bench fooled", "gpu-softmax"): "no benchmark hook (bench runs attention families)",
    ("bench fooled", "gpu-norm"): "no benchmark hook",
    ("bench fooled", "megablox-gmm"): "no benchmark hook",
    ("memoized or constant", "gpu-mha"): "a memo inside a traced program keys its host "
        "state by the data, and gpu-mha's wrapper is layout only: the read is named math "
        "outside first (its memoized_mha row)",
    ("bench fooled", "gpu-mha"): "a memo keys its host state by the data, and gpu-mha's "
        "wrapper is layout only: bench's pre-check names it math outside before any timing",
    ("memoized or constant", "gpu-norm"): "a memo keys its host state by the data, and "
        "gpu-norm's wrapper is layout only: named math outside first (memoized_norm)",
}

#: Where a class applies and the harness cannot fail its cheat yet (none now).
NOT_CAUGHT: dict[tuple[str, str], str] = {}

POISON = "tests.helpers.poison_impls"
OUTSIDE = "tests.helpers.outside_impls"
FALLBACK = "tests.helpers.fallback_impls"
PLANTED = "tests.helpers.planted_softmax"
GENERIC = "tests.helpers.generic_cheats"
VALUES = "tests.helpers.value_cheats"
BENCH = "tests.helpers.bench_planted"
BODIES = "tests.helpers.kernel_body_cheats"
ROUND4 = "tests.adversarial.impls_round4"
ROUND8 = "tests.adversarial.impls_round8"
ROUND13 = "tests.adversarial.impls_round13"
ROUND14 = "tests.adversarial.impls_round14"

REFERENCE = "matches-reference"


@dataclasses.dataclass(frozen=True)
class Cheat:
    """One planted cheat and how it must fail."""

    cls: str
    family: str
    impl: str
    words: tuple[str, ...]
    notes: tuple[str, ...] = ()
    prop: str = REFERENCE
    #: ``--max-examples``: the fewest that reach the values the class needs.
    examples: int = 1
    #: ``check``, or ``bench`` (``bench FAMILY --seq-lens 128 --mode fwd ...``).
    command: str = "check"
    per_push: bool = False
    #: ``MODULE:ATTR`` called before the command (the planted state's reset).
    setup: str | None = None

    @property
    def id(self) -> str:
        return f"{self.cls.replace(' ', '-')}:{self.family}:{self.impl.rsplit(':', 1)[1]}"


_UNUSED = "kernel result unused ("
_OUTSIDE = "math outside the kernel ("
_NO_KERNEL = "no Pallas kernel ("
_REPEATED = "result repeated across distinct inputs"


def _declared(what: str) -> str:
    return f"the implementation declares it lacks {what}: NOT left out"


CHEATS: tuple[Cheat, ...] = (
    # 1-2: a kernel result thrown away, times zero, behind a zero-trip loop or an untaken
    # branch, a backward kernel whose gradients are dropped
    Cheat("result unused", "gpu-softmax", f"{POISON}:thrown_softmax", (_UNUSED,),
          per_push=True),
    Cheat("result unused", "gpu-softmax", f"{POISON}:zero_trip_softmax", (_UNUSED,)),
    Cheat("result unused", "gpu-softmax", f"{POISON}:untaken_cond_softmax", (_UNUSED,)),
    Cheat("result unused", "megablox-gmm", f"{POISON}:times_zero_gmm", (_UNUSED,)),
    Cheat("result unused", "gpu-mha", f"{POISON}:thrown_backward_mha",
          (_UNUSED + "gradient of `q`, gradient of `k`, gradient of `v`)",)),
    # 3: a copy kernel with the math outside, a pure_callback to numpy, a kernel doing
    # only the row max
    Cheat("math outside", "gpu-softmax", f"{OUTSIDE}:copy_softmax",
          (_OUTSIDE + "forward: div, exp, exp|exp2 in no kernel, reduce_max, reduce_sum, "
           "reduce_sum in no kernel)",), per_push=True),
    # (the same math spelled without a measured primitive: only the op's core, declared
    # inside the kernel, fails it)
    Cheat("math outside", "gpu-softmax", f"{OUTSIDE}:unmeasured_copy_softmax",
          (_OUTSIDE + "forward: exp|exp2 in no kernel, reduce_sum in no kernel)",)),
    # (the core computed in the kernel and cancelled there: perturbed, it changes nothing)
    Cheat("math outside", "gpu-softmax", f"{OUTSIDE}:cancelled_core_softmax",
          (_OUTSIDE, "exp|exp2|reduce_sum cancelled in the kernel")),
    # (the same on the TPU interpreter's settings, not interpret=True: judged too)
    Cheat("math outside", "gpu-softmax", f"{OUTSIDE}:cancelled_core_softmax_tpu_interpreted",
          (_OUTSIDE, "exp|exp2|reduce_sum cancelled in the kernel")),
    Cheat("math outside", "gpu-softmax", f"{OUTSIDE}:callback_softmax",
          (_OUTSIDE + "forward: exp|exp2 in no kernel, pure_callback, reduce_sum in no kernel)",)),
    # (softmax is shift-invariant: what the row-max kernel returns often does not change
    # the answer, and poisoning names it first, as on the ci profile's first example since
    # the draws of 2026-12-07 (logits of 1e37); the math outside is said in the header)
    Cheat("result unused", "gpu-softmax", f"{OUTSIDE}:rowmax_softmax", (_UNUSED,),
          notes=("math outside the kernel: div, exp, exp|exp2 in no kernel, reduce_sum, "
                 "reduce_sum in no kernel (forward)",)),
    Cheat("math outside", "gpu-norm", f"{OUTSIDE}:copy_norm", (_OUTSIDE,)),
    Cheat("math outside", "megablox-gmm", f"{OUTSIDE}:copy_gmm",
          (_OUTSIDE + "forward: dot_general, dot_general in no kernel; backward: "
           "dot_general, dot_general in no kernel)",)),
    Cheat("math outside", "gpu-mha", f"{OUTSIDE}:copy_mha", (_OUTSIDE + "forward: ",)),
    # (a layout-only family's wrapper scaling rows by a constant array, 1.0 where the draws
    # look: round 8 of the adversarial set, tests/adversarial/impls_round8.py)
    Cheat("math outside", "gpu-norm", f"{ROUND8}:norm_rows_past_1024_scaled",
          (_OUTSIDE + "forward: mul; backward: mul)",)),
    # (a layout-only wrapper that reads the data's values at all, whatever the size: a
    # memo's hash of its inputs, a roll chosen by a logit's bits: round 13)
    Cheat("math outside", "gpu-softmax", f"{GENERIC}:memoized_softmax",
          (_OUTSIDE + "forward: ", "reading the data's values"), setup=f"{GENERIC}:forget"),
    Cheat("math outside", "gpu-mha", f"{GENERIC}:memoized_mha",
          (_OUTSIDE + "forward: ", "reading the data's values"), setup=f"{GENERIC}:forget"),
    Cheat("math outside", "gpu-norm", f"{GENERIC}:memoized_norm",
          (_OUTSIDE + "forward: ", "reading the data's values"), setup=f"{GENERIC}:forget"),
    Cheat("math outside", "gpu-softmax", f"{BODIES}:rolled_by_its_bits",
          (_OUTSIDE + "forward: ", "bitcast_convert_type", "reading the data's values")),
    # (a wrapper that is not layout only reads with no more than the family's declares:
    # round 13's output reversed where q's first features carry a bit pattern)
    Cheat("math outside", "gpu-decode", f"{ROUND13}:dc_bitkey_flip",
          (_OUTSIDE + "forward: and, bitcast_convert_type, eq, select_n reading the data's",)),
    # (an integer input's value read by a wrapper that only passes it on: round 13's
    # segment ids compared with a key, and its decode bounds)
    Cheat("math outside", "gpu-mha", f"{ROUND13}:mh_segkey",
          (_OUTSIDE + "forward: ", "reading the integer inputs' values")),
    Cheat("math outside", "gpu-decode", f"{ROUND13}:dc_boundkey",
          (_OUTSIDE + "forward: ", "reading the integer inputs' values")),
    Cheat("math outside", "gpu-mha", f"{ROUND14}:mha_segment_id_bits",
          (_OUTSIDE + "forward: and reading the integer inputs' values",)),
    # (a kernel whose body hands its block to numpy and stores the host's answer: the
    # kernel computes nothing; only interpret mode runs it)
    Cheat("math outside", "gpu-softmax", f"{GENERIC}:host_in_kernel_softmax",
          (_OUTSIDE + "forward: exp|exp2 in no kernel, pure_callback in a kernel body, "
           "reduce_sum in no kernel)",)),
    # 4: the kernel on every second call, plain JAX on the others
    # (its own counter: tests/run/test_kernel_count.py runs fallback_impls' in-process).
    # On deterministic: matches-reference first traces an --impl three times to aim at its
    # own constants (checks/aimed.py), so its first judged call is a kernel call and the
    # counter's other true class, suspicious source (keeps state across calls), comes first
    Cheat("otherwise when counted", "gpu-softmax", f"{GENERIC}:every_other_call_softmax",
          ("deterministic", "no Pallas kernel: run 1"), prop="deterministic", per_push=True),
    Cheat("otherwise when counted", "gpu-mha", f"{GENERIC}:every_other_call_mha",
          (_NO_KERNEL,)),
    Cheat("otherwise when counted", "gpu-norm", f"{GENERIC}:every_other_call_norm",
          (_NO_KERNEL,)),
    # the kernel's result when traced, another when called on concrete arrays
    Cheat("otherwise when eager", "gpu-softmax", f"{GENERIC}:wrong_when_eager_softmax",
          ("FAIL gpu-softmax behaves otherwise when called eagerly",), per_push=True),
    Cheat("otherwise when eager", "gpu-mha", f"{GENERIC}:wrong_when_eager_mha",
          ("behaves otherwise when called eagerly",)),
    Cheat("otherwise when eager", "gpu-norm", f"{GENERIC}:wrong_when_eager_norm",
          ("behaves otherwise when called eagerly",)),
    # 5: plain XLA (or a concatenation) past the drawn sizes
    Cheat("ghost branch", "gpu-softmax", f"{PLANTED}:ghost_past_2048",
          ("ghost branch bfloat16 x=(8, 262144)", "launches 0 Pallas kernel(s) there"),
          prop="claimed-sizes", per_push=True),
    Cheat("ghost branch", "gpu-softmax", f"{PLANTED}:concatenated_past_2048",
          ("ghost branch", "it computes concatenate"), prop="claimed-sizes"),
    Cheat("ghost branch", "gpu-norm", f"{GENERIC}:ghost_norm",
          ("ghost branch bfloat16 x=(1, 4096, 8192)", "launches 0 Pallas kernel(s) there"),
          prop="claimed-sizes"),
    # (between the largest drawn size and the smallest claimed one: a rung of the ladder)
    Cheat("ghost branch", "gpu-softmax",
          f"{GENERIC}:ghost_between_the_drawn_and_the_claimed_softmax",
          ("ghost branch", "rung "), prop="claimed-sizes"),
    Cheat("ghost branch", "gpu-mha", f"{GENERIC}:ghost_mha",
          ("ghost branch bfloat16 q=(1, 32768, 8, 128)", "launches 0 Pallas kernel(s) there"),
          prop="claimed-sizes"),
    # (inside the kernel: a constant, a mask bound or a cast chosen from the shape)
    Cheat("ghost branch", "gpu-softmax", f"{BODIES}:gain_past_rows",
          ("ghost branch bfloat16 x=(4, 8192, 256)", "body holds the constant 0.75"),
          prop="claimed-sizes"),
    Cheat("ghost branch", "gpu-softmax", f"{BODIES}:last_logit_dropped",
          ("ghost branch float32 x=(64, 32000)", "body bounds a position by 31999"),
          prop="claimed-sizes"),
    # (an epilogue kernel of its own, the same at every size, zeroing rows past 1024)
    Cheat("ghost branch", "gpu-softmax", f"{BODIES}:epilogue_row_limit",
          ("ghost branch float32 x=(16384, 8)", "with every kernel stood in for"),
          prop="claimed-sizes"),
    # 6: wrong only at values a fixed menu never drew (a masked leading block, a segment
    # of length 1, a mean offset by many spreads): the comparison names the output, and
    # the case's label the values
    # (10 examples: its dead block must be -inf, and masks are finite sentinels half the
    # time since the softmax op draws them; 5 sufficed before)
    Cheat("values never drawn", "gpu-softmax", f"{VALUES}:zero_after_a_masked_block",
          ("FAIL gpu-softmax out ", "masked=", "rel err"), examples=10, per_push=True),
    Cheat("values never drawn", "gpu-mha", f"{VALUES}:nan_at_length_1_segments",
          ("FAIL gpu-mha out ", " segments ", "NaN not in the reference")),
    # (round 14's, independent: past the menus, met every run by the spans' tops as seeds)
    Cheat("values never drawn", "gpu-norm", f"{ROUND14}:norm_batch_axes_swapped",
          ("FAIL gpu-norm out float32 rms_norm x=(64,4,128)", "max rel err")),
    Cheat("values never drawn", "gpu-decode", f"{ROUND14}:decode_big_scale",
          ("FAIL gpu-decode out float32", "scale=4.0", "max rel err")),
    Cheat("values never drawn", "gpu-norm", f"{VALUES}:doubled_at_offset_rows",
          ("FAIL gpu-norm out ", "max rel err")),
    # 6: memoized (first result per shape) and constant outputs
    Cheat("memoized or constant", "gpu-softmax", f"{GENERIC}:constant_softmax",
          ("FAIL gpu-softmax out ", "rel err"), per_push=True),
    # (a memo inside a traced program keys its host state by the data: where the wrapper
    # is layout only or declares what it reads the data with, that read is named first,
    # above; gpu-paged's and flash's wrappers declare nothing yet)
    Cheat("memoized or constant", "flash", f"{GENERIC}:memoized_flash",
          ("FAIL flash ", "rel err"), examples=3, setup=f"{GENERIC}:forget"),
    Cheat("memoized or constant", "gpu-paged", f"{GENERIC}:memoized_paged",
          ("FAIL gpu-paged ", "rel err"), examples=3, setup=f"{GENERIC}:forget"),
    # 6: float32 computed in bfloat16
    Cheat("lower precision", "gpu-softmax", f"{GENERIC}:bfloat16_softmax",
          ("FAIL gpu-softmax out float32", "max rel err"), per_push=True),
    Cheat("lower precision", "gpu-mha", f"{GENERIC}:bfloat16_mha",
          ("FAIL gpu-mha out float32", "max rel err")),
    Cheat("lower precision", "megablox-gmm", f"{GENERIC}:bfloat16_gmm",
          ("FAIL megablox-gmm out float32", "max rel err")),
    # 7: another result on the same inputs, inside the tolerance
    Cheat("nondeterministic", "gpu-softmax", f"{GENERIC}:nondeterministic_softmax",
          ("FAIL gpu-softmax nondeterministic (out)", "changed out: "), per_push=True),
    Cheat("nondeterministic", "gpu-mha", f"{GENERIC}:nondeterministic_mha",
          ("FAIL gpu-mha nondeterministic (", "running the same compiled program again")),
    Cheat("nondeterministic", "gpu-norm", f"{GENERIC}:nondeterministic_norm",
          ("FAIL gpu-norm nondeterministic (out, out_vjp)",)),
    # 8: a feature declared missing, and wrong exactly there
    Cheat("declared exclusion", "gpu-norm", f"{GENERIC}:without_rms_norm",
          ("FAIL gpu-norm out ", " rms_norm ", "max rel err"),
          notes=(_declared("rms-norm"),), per_push=True),
    Cheat("declared exclusion", "gpu-mha", f"{GENERIC}:without_segments_mha",
          ("FAIL gpu-mha out ", " segments ", "max rel err"),
          notes=(_declared("segments"),)),
    Cheat("declared exclusion", "megablox-gmm", f"{GENERIC}:without_small_sizes_gmm",
          ("FAIL megablox-gmm out ", "max rel err"), notes=(_declared("sizes-below-128"),)),
    # 8: a fallback the implementation declares about itself
    Cheat("declared fallback", "gpu-softmax", f"{FALLBACK}:declared_pow2_only_softmax",
          (_NO_KERNEL + "fwd)",), notes=("declares a fallback (rows whose length is not a "
                                         "power of two run jax.nn.softmax): NOT accepted",),
          per_push=True),
    Cheat("declared fallback", "gpu-mha", f"{GENERIC}:declared_fallback_mha",
          (_NO_KERNEL,), notes=("declares a fallback (calls without segment ids run plain "
                                "JAX): NOT accepted",)),
    Cheat("declared fallback", "gpu-norm", f"{GENERIC}:declared_fallback_norm",
          (_NO_KERNEL,), notes=("declares a fallback (rms_norm runs plain JAX): NOT "
                                "accepted",)),
    # 9: wrong once, right when the example runs again
    Cheat("flaky", "gpu-softmax", f"{GENERIC}:flaky_softmax",
          ("FLAKY gpu-softmax deterministic", "the failure does not recur"),
          prop="deterministic", setup=f"{GENERIC}:arm", per_push=True),
    Cheat("flaky", "gpu-mha", f"{GENERIC}:flaky_mha",
          ("FLAKY gpu-mha deterministic", "the failure does not recur"),
          prop="deterministic", setup=f"{GENERIC}:arm"),
    Cheat("flaky", "gpu-norm", f"{GENERIC}:flaky_norm",
          ("FLAKY gpu-norm deterministic", "the failure does not recur"),
          prop="deterministic", setup=f"{GENERIC}:arm"),
    # 10: a benchmark that would time a cache lookup
    Cheat("bench fooled", "sdpa", f"{BENCH}:sdpa_memoized", ("FAIL", _REPEATED),
          command="bench", setup=f"{BENCH}:forget", per_push=True),
    Cheat("bench fooled", "flash", f"{GENERIC}:memoized_flash", ("FAIL", _REPEATED),
          command="bench", setup=f"{GENERIC}:forget"),
    Cheat("bench fooled", "gpu-paged", f"{GENERIC}:memoized_paged", ("FAIL", _REPEATED),
          command="bench", setup=f"{GENERIC}:forget"),
    # principle 2: honest whenever checked, wrong in a user's run (round 4 of the
    # adversarial set, written independently: tests/adversarial/impls_round4.py)
    Cheat("otherwise unobserved", "gpu-softmax", f"{ROUND4}:harness_aware_softmax",
          ("FAIL gpu-softmax suspicious source (observes the harness)", "sys.modules"),
          per_push=True),
    Cheat("otherwise unobserved", "gpu-norm", f"{ROUND4}:dated_norm",
          ("FAIL gpu-norm suspicious source (reads the clock", "datetime.date.today"),),
    Cheat("otherwise unobserved", "megablox-gmm", f"{ROUND4}:tpu_only_bf16_gmm",
          ("FAIL megablox-gmm suspicious source (branches on the backend)",)),
    Cheat("otherwise unobserved", "gpu-mha", f"{ROUND4}:call_count_bomb_mha",
          ("FAIL gpu-mha suspicious source (keeps state across calls)", "_MHA_CALLS"),),
    Cheat("otherwise unobserved", "gpu-norm", f"{ROUND8}:norm_bf16_weight_in_some_processes",
          ("FAIL gpu-norm suspicious source (reads the process or host)", "os.getpid"),),
)

#: Cheats the harness does not fail yet, each run as a strict xfail (nightly): the day one
#: fails, its test says so and the row moves to CHEATS. (None now: the ghost branch between
#: the drawn and the claimed sizes is failed by the ladder of claimed-sizes.)
HOLES: tuple[Cheat, ...] = ()

#: The families whose pristine kernels run the catalog's commands, with the per-push ones.
FAMILIES: tuple[str, ...] = tuple(dict.fromkeys(c.family for c in CHEATS))
PER_PUSH_FAMILIES: frozenset[str] = frozenset(c.family for c in CHEATS if c.per_push)
