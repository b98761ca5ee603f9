"""`make fuzz` (tests/fuzz.py): it runs programs with variables every compiled way and would
report a wrong variable."""

import numpy as np

import fuzz
from random_programs import RandomProgram

# v0 = x; var0.assign(tanh(x)); with control_dependencies([the assign]): v2 = var0.value();
# var0.assign_add(v2); return the read
PROGRAM = RandomProgram(inputs=(((3, 4), np.float64),),
                        steps=(("unary", "tanh", (0,), ()), ("assign", "assign", (1,), (0,)),
                               ("control", "control", (0,), (0,)), ("read", "read", (), (0,)),
                               ("assign_add", "assign_add", (2,), (0,))),
                        outputs=(2,), variables=(((3, 4), np.float64),))


def test_fuzz_runs_a_program_with_variables_fused_unfused_and_on_two_devices():
    assert "control_dependencies" in PROGRAM.describe() and "var0.assign_add" in PROGRAM.describe()
    for seed in (0, 1, 2, 3):                       # random placements: the variable on either device
        assert fuzz.state_mismatch(PROGRAM, seed) is None


def test_fuzz_reports_a_variable_that_differs():
    args = PROGRAM.make_args(np.random.default_rng(0))
    want = np.tanh(args[0]) * 2
    assert fuzz.differs([want], [want], args, "variable") is None
    assert "variable 0 differs" in fuzz.differs([want + 1e-3], [want], args, "variable")
    assert "variable 0 is float32" in fuzz.differs([want.astype(np.float32)], [want], args, "variable")
