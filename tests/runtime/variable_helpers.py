"""What the variable tests share: the devices and every compiled way of running a program."""

TWO = ["cpu:0", "cpu:1"]
# Every compiled way of running a program, and the oracle.
MODES = {"fused": {}, "unfused": {"fuse": False}, "interpreter": {"backend": "interpreter"},
         "two devices": {"devices": TWO}}
