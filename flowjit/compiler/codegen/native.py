"""Native kernel entries: a warm process runs cached kernels without importing numba.

Importing numba takes about 0.25 s and initialising its runtime 40 ms more, most of a fresh
process's first call when every kernel is already in the kernel cache.  So where numba
saves a serial kernel's machine code, the cache also keeps a *native entry* beside it
(``<stem>.native.<argument key>``): numba's object code as it is, the list of symbols it
leaves undefined, and a small adapter compiled here (``_adapter_ir``).
The adapter checks each argument against the types the kernel was compiled for (an exact
``ndarray``, its dtype, rank, native byte order and, for 'C' and 'F' layouts, contiguity),
reads data, shape and strides from numpy's array struct and calls numba's function with
numba's calling convention (arrays flattened to meminfo, parent, size, itemsize, data,
shape, strides); it answers None when the kernel ran, and ``MISMATCH`` or numba's status
otherwise.  A process that has not imported numba loads the entry with llvmlite alone into
one MCJIT engine of its own and calls the adapter as a builtin function (``METH_FASTCALL``:
no more than a numba dispatcher's call costs), which releases the GIL while the kernel runs,
as numba's ``nogil`` does.

What numba's object code needs besides the kernel is decided where it was compiled: the
functions and globals the kernel's own function reaches, followed through the module's
calls.  An entry is written only when those are numba's allocator (scratch rows:
``RUNTIME``, which the engine defines with the same memory layout) or symbols of the
process (libm, libc); the Python wrappers numba puts in the same object need helpers of
numba's C extensions, which the engine binds to a trap, since nothing here calls them.

``NativeKernel`` is the serial callable the driver gets for such a kernel; arguments of
another type, a kernel that reports an error, or an entry that cannot be loaded go to
numba's dispatcher, imported then, which computes the same thing (it is the same machine
code) or raises numba's error.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import pickle
import re
import struct
import threading

import numpy as np

FORMAT = 4
MISMATCH = -1000               # the adapter's answer for arguments of other types
STATUS_NONE = -2               # numba's status for a function that returned None: success

# numpy's array struct (PyArrayObject_fields) and descriptor: the offsets numpy's own macros
# compile into extensions, the same in numpy 1 and 2 on 64-bit platforms; ``layout_ok`` checks them.
OB_TYPE, DATA, NDIM, SHAPE, STRIDES, DESCR, FLAGS = 8, 16, 24, 32, 40, 56, 64
DESCR_BYTEORDER, DESCR_TYPE_NUM = 26, 28
C_CONTIGUOUS, F_CONTIGUOUS = 0x1, 0x2

# numba's runtime functions a kernel's own code may call (scratch rows), as the engine
# defines them: a meminfo is numba's (refcount, dtor, dtor_info, data, size, allocator), in
# one block with its data, so dropping the last reference frees the block.
RUNTIME = {"NRT_MemInfo_alloc_aligned": "ptr (i64, i32)", "NRT_MemInfo_call_dtor": "void (ptr)",
           "NRT_Allocate": "ptr (i64)", "NRT_Free": "void (ptr)",
           # numba's helpers for math.frexp and math.ldexp: the C library's, with zero, NaN and
           # infinity passed through (numba's _helperlib.c)
           "numba_frexp": "double (double, ptr)", "numba_frexpf": "float (float, ptr)",
           "numba_ldexp": "double (double, i32)", "numba_ldexpf": "float (float, i32)"}
_RUNTIME_IR = """
declare ptr @malloc(i64)
declare void @free(ptr)
@flowjit_ndarray_type = global i64 {ndarray}

define ptr @NRT_MemInfo_alloc_aligned(i64 %size, i32 %align) {{
  %wide = zext i32 %align to i64
  %nonzero = icmp ugt i64 %wide, 1
  %alignment = select i1 %nonzero, i64 %wide, i64 1
  %extra = add i64 %alignment, 48
  %total = add i64 %size, %extra
  %block = call ptr @malloc(i64 %total)
  %failed = icmp eq ptr %block, null
  br i1 %failed, label %fail, label %fill
fail:
  ret ptr null
fill:
  %start = ptrtoint ptr %block to i64
  %past = add i64 %start, 48
  %mask = sub i64 %alignment, 1
  %up = add i64 %past, %mask
  %inverse = xor i64 %mask, -1
  %aligned = and i64 %up, %inverse
  %data = inttoptr i64 %aligned to ptr
  store i64 1, ptr %block
  %dtor = getelementptr i8, ptr %block, i64 8
  store ptr null, ptr %dtor
  %info = getelementptr i8, ptr %block, i64 16
  store ptr null, ptr %info
  %dataslot = getelementptr i8, ptr %block, i64 24
  store ptr %data, ptr %dataslot
  %sizeslot = getelementptr i8, ptr %block, i64 32
  store i64 %size, ptr %sizeslot
  %allocator = getelementptr i8, ptr %block, i64 40
  store ptr null, ptr %allocator
  ret ptr %block
}}

define void @NRT_MemInfo_call_dtor(ptr %meminfo) {{
  call void @free(ptr %meminfo)
  ret void
}}

define ptr @NRT_Allocate(i64 %size) {{
  %block = call ptr @malloc(i64 %size)
  ret ptr %block
}}

define void @NRT_Free(ptr %block) {{
  call void @free(ptr %block)
  ret void
}}
"""


def _math_helper(c: str, t: str, s: str, second: str) -> str:
    """numba's helper for frexp or ldexp (``c``): the C library's, but for zero, NaN and
    infinity, which it returns as they are (frexp with exponent 0), as does an ldexp by 0."""
    frexp = c.startswith("frexp")
    shift = "" if frexp else "\n  %shift = icmp ne i32 %e, 0\n  %both = and i1 %regular, %shift"
    store = "\n  store i32 0, ptr %e" if frexp else ""
    return f"""
declare {t} @{c}({t}, {second})
define {t} @numba_{c}({t} %x, {second} %e) {{{{
  %magnitude = call {t} @llvm.fabs.{s}({t} %x)
  %finite = fcmp olt {t} %magnitude, 0x7FF0000000000000
  %nonzero = fcmp one {t} %x, 0.0
  %regular = and i1 %finite, %nonzero{shift}
  br i1 {"%regular" if frexp else "%both"}, label %call, label %keep
call:
  %y = call {t} @{c}({t} %x, {second} %e)
  ret {t} %y
keep:{store}
  ret {t} %x
}}}}
"""


_RUNTIME_IR += "declare double @llvm.fabs.f64(double)\ndeclare float @llvm.fabs.f32(float)\n" + "".join(
    _math_helper(*helper) for helper in (("frexp", "double", "f64", "ptr"), ("frexpf", "float", "f32", "ptr"),
                                         ("ldexp", "double", "f64", "i32"), ("ldexpf", "float", "f32", "i32")))


def layout_ok() -> bool:
    """Whether numpy's array struct has the offsets the adapters read (checked on an array)."""
    array = np.empty((3, 2), dtype=np.float32)[:, ::-1]
    address = id(array)

    def word(offset, kind=ctypes.c_int64):
        return kind.from_address(address + offset).value
    descr = word(DESCR)
    return (word(OB_TYPE) == id(np.ndarray) and word(DATA) == array.__array_interface__["data"][0]
            and word(NDIM, ctypes.c_int32) == 2 and ctypes.c_int32.from_address(descr + DESCR_TYPE_NUM).value
            == array.dtype.num and (ctypes.c_int64 * 2).from_address(word(SHAPE))[:] == [3, 2]
            and (ctypes.c_int64 * 2).from_address(word(STRIDES))[:] == list(array.strides)
            and word(FLAGS, ctypes.c_int32) & (C_CONTIGUOUS | F_CONTIGUOUS) == 0)


# -- argument keys: what an entry was compiled for, from numba's types or from the arrays -----------
def layout(array: np.ndarray) -> str:
    """numba's layout of an array (``map_layout``)."""
    flags = array.flags
    return "C" if flags.c_contiguous else "F" if flags.f_contiguous else "A"


def argument_key(arrays) -> str | None:
    """``float32:2C|int64:1A``: the dtype, rank and layout of each argument, as numba types
    them (whether an array is writable is left out: it does not change the machine code);
    None when an argument is not a plain ndarray of native byte order."""
    parts = []
    for array in arrays:
        if type(array) is not np.ndarray or not array.dtype.isnative or array.dtype.kind not in "biufc":
            return None
        parts.append(f"{array.dtype.name}:{array.ndim}{layout(array)}")
    return "|".join(parts)


def _type_nums(dtype: np.dtype) -> list[int]:
    """numpy's type numbers of ``dtype`` (int64 is both ``long`` and ``longlong`` on Linux)."""
    return sorted({np.dtype(code).num for code in "?bBhHiIlLqQefdgFDG" if np.dtype(code) == dtype})


# -- where numba compiled the kernel: the entry ------------------------------------------------------
def elf_undefined(code: bytes) -> list[str]:
    """The undefined symbols of a 64-bit little-endian ELF object file."""
    if code[:4] != b"\x7fELF" or code[4:6] != b"\x02\x01":
        raise ValueError("not a 64-bit little-endian ELF object")
    section_offset, = struct.unpack_from("<Q", code, 0x28)
    entry_size, count = struct.unpack_from("<HH", code, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", code, section_offset + index * entry_size) for index in range(count)]
    names = []
    for _, kind, _, _, offset, size, link, _, _, symbol_size in sections:
        if kind != 2:                               # SHT_SYMTAB
            continue
        strings = sections[link][4]
        for at in range(offset, offset + size, symbol_size or 24):
            name, _, _, section = struct.unpack_from("<IBBH", code, at)
            if section == 0 and name:
                names.append(code[strings + name:code.index(b"\0", strings + name)].decode())
    return names


_DEFINE = re.compile(r'^define [^@]*@("[^"]+"|[-\w.$]+)\(', re.M)
_DECLARE = re.compile(r'^declare [^@]*@("[^"]+"|[-\w.$]+)\(([^)]*)\)', re.M)
_GLOBAL = re.compile(r'^@("[^"]+"|[-\w.$]+) = ([^\n]*)', re.M)
_REFERENCE = re.compile(r'@("[^"]+"|[-\w.$]+)')


def reachable(ir: str, root: str) -> set[str]:
    """The global names ``root``'s code refers to in module ``ir``, through the functions it
    calls and the globals' initialisers (wrappers that nothing reaches are left out)."""
    bodies: dict[str, str] = {}
    starts = [(match.start(), match.group(1).strip('"')) for match in _DEFINE.finditer(ir)]
    for (start, name), (end, _) in zip(starts, starts[1:] + [(len(ir), "")]):
        bodies[name] = ir[start:ir.find("\n}", start) + 2 if ir.find("\n}", start, end) >= 0 else end]
    for match in _GLOBAL.finditer(ir):
        bodies.setdefault(match.group(1).strip('"'), match.group(2))
    seen, todo = {root}, [root]
    while todo:
        for reference in _REFERENCE.findall(bodies.get(todo.pop(), "")):
            name = reference.strip('"')
            if name not in seen:
                seen.add(name)
                todo.append(name)
    return seen


def _process_symbol(process, name: str, llvm) -> bool:
    """Whether ``name`` is the process's own symbol (libm, libc) as LLVM resolves it, not one
    numba registered (which a process without numba lacks).  numba binds the C math functions
    (``INTR_MATH``: sqrt, exp, fmod...) to the C runtime's own through its helper library,
    which on Linux is the process's libm: those count as the process's."""
    from numba.core.intrinsics import INTR_MATH
    try:
        address = ctypes.cast(getattr(process, name), ctypes.c_void_p).value
    except AttributeError:
        return False
    return address == llvm.address_of_symbol(name) or name in INTR_MATH


def _flattened(argument_types) -> list[str]:
    """numba's LLVM parameters for array arguments: meminfo, parent, size, itemsize, data,
    then the shape and the strides (after the return pointer and the exception slot)."""
    parameters = ["ptr", "ptr"]
    for array in argument_types:
        parameters += ["ptr", "ptr", "i64", "i64", "ptr"] + ["i64"] * (2 * array.ndim)
    return parameters


def _field(lines: list, a: str, label: str, offset: int, kind: str, base: str | None = None) -> str:
    """Read a field of argument ``a``'s struct (or of ``base``) at ``offset`` into ``%a<i>.<label>``."""
    lines.append(f"  {a}.{label}.at = getelementptr i8, ptr {base or a}, i64 {offset}")
    lines.append(f"  {a}.{label} = load {kind}, ptr {a}.{label}.at")
    return f"{a}.{label}"


def _argument_checks(index: int, array: dict, following: str) -> list[str]:
    """Blocks ``arg<index>``: an exact ndarray, then its rank, byte order, layout and type
    number; on to block ``following``, or to ``mismatch``."""
    a, lines = f"%a{index}", [f"arg{index}:"]
    _field(lines, a, "type", OB_TYPE, "i64")
    lines += [f"  {a}.exact = icmp eq i64 {a}.type, %ndarray",
              f"  br i1 {a}.exact, label %arg{index}.fields, label %mismatch", f"arg{index}.fields:"]
    _field(lines, a, "ndim", NDIM, "i32")
    descr = _field(lines, a, "descr", DESCR, "ptr")
    _field(lines, a, "num", DESCR_TYPE_NUM, "i32", descr)
    _field(lines, a, "order", DESCR_BYTEORDER, "i8", descr)
    _field(lines, a, "flags", FLAGS, "i32")
    lines.append(f"  {a}.required = and i32 {a}.flags, {array['flags']}")
    terms = [f"icmp eq i32 {a}.ndim, {array['ndim']}", f"icmp ne i8 {a}.order, 62",        # 62: '>'
             f"icmp eq i32 {a}.required, {array['flags']}"]
    held = []
    for n, term in enumerate(terms):
        lines.append(f"  {a}.term{n} = {term}")
        held.append(f"{a}.term{n}")
    numbers = []
    for n, number in enumerate(array["nums"]):
        lines.append(f"  {a}.num{n} = icmp eq i32 {a}.num, {number}")
        numbers.append(f"{a}.num{n}")
    result = numbers[0]
    for n, term in enumerate(numbers[1:] + held):                # any type number, and every term
        lines.append(f"  {a}.all{n} = {'or' if n < len(numbers) - 1 else 'and'} i1 {result}, {term}")
        result = f"{a}.all{n}"
    lines.append(f"  br i1 {result}, label %{following}, label %mismatch")
    return lines


def _argument_loads(index: int, array: dict, loads: list) -> list[str]:
    """numba's flattened array argument from the struct: meminfo (none), parent, size,
    itemsize, data, shape, strides (``loads`` gets the reads)."""
    a = f"%a{index}"
    data = _field(loads, a, "data", DATA, "ptr")
    shape = _field(loads, a, "shape", SHAPE, "ptr")
    strides = _field(loads, a, "strides", STRIDES, "ptr")
    sizes, steps = [], []
    for axis in range(array["ndim"]):
        for label, base, out in (("n", shape, sizes), ("s", strides, steps)):
            loads.append(f"  {a}.{label}{axis}.at = getelementptr i64, ptr {base}, i64 {axis}")
            loads.append(f"  {a}.{label}{axis} = load i64, ptr {a}.{label}{axis}.at")
            out.append(f"{a}.{label}{axis}")
    count = "1"
    for axis, size in enumerate(sizes):
        loads.append(f"  {a}.count{axis} = mul i64 {count}, {size}")
        count = f"{a}.count{axis}"
    return ["ptr null", f"ptr {a}", f"i64 {count}", f"i64 {array['itemsize']}", f"ptr {data}"] + \
        [f"i64 {value}" for value in sizes + steps]


def _adapter_ir(name: str, symbol: str, arrays: list[dict]) -> str:
    """The adapter, a ``METH_FASTCALL`` function of CPython's (``(self, args, count)``, made a
    builtin by ``Engine.load``): check the count and every argument, then call numba's
    function without the GIL, as numba's ``nogil`` does; None when it ran, else its status as
    an int (``MISMATCH`` for arguments it does not take).  ``arrays``: each one's ``ndim``,
    ``itemsize``, type numbers ``nums`` and required ``flags``.  Every argument's type is
    read before anything else of it: an object that is not an exact ndarray is refused
    without reading past its header."""
    checks, loads, arguments = [], [], []
    for index, array in enumerate(arrays):
        following = f"arg{index + 1}" if index + 1 < len(arrays) else "call"
        checks += _argument_checks(index, array, following)
        arguments += _argument_loads(index, array, loads)
    fetch = "\n".join(f"  %a{index}.slot = getelementptr ptr, ptr %args, i64 {index}\n"
                      f"  %a{index} = load ptr, ptr %a{index}.slot" for index in range(len(arrays)))
    declared = ", ".join(["ptr", "ptr"] + [argument.split()[0] for argument in arguments])
    newline = "\n"
    return f"""
@flowjit_ndarray_type = external global i64
@_Py_NoneStruct = external global i8
declare i32 @"{symbol}"({declared})
declare ptr @PyEval_SaveThread()
declare void @PyEval_RestoreThread(ptr)
declare void @Py_IncRef(ptr)
declare ptr @PyLong_FromLong(i64)

define ptr @{name}(ptr %self, ptr %args, i64 %count) {{
entry:
  %ret = alloca [8 x i64], align 16
  %exc = alloca ptr, align 8
  %ndarray = load i64, ptr @flowjit_ndarray_type
  %arity = icmp eq i64 %count, {len(arrays)}
  br i1 %arity, label %fetch, label %mismatch
fetch:
{fetch}
  br label %arg0
{newline.join(checks)}
call:
{newline.join(loads)}
  %thread = call ptr @PyEval_SaveThread()
  %status = call i32 @"{symbol}"(ptr %ret, ptr %exc, {", ".join(arguments)})
  call void @PyEval_RestoreThread(ptr %thread)
  %ok = icmp eq i32 %status, 0
  %none = icmp eq i32 %status, {STATUS_NONE}
  %done = or i1 %ok, %none
  br i1 %done, label %success, label %failed
success:
  call void @Py_IncRef(ptr @_Py_NoneStruct)
  ret ptr @_Py_NoneStruct
failed:
  %code = sext i32 %status to i64
  %answer = call ptr @PyLong_FromLong(i64 %code)
  ret ptr %answer
mismatch:
  %refused = call ptr @PyLong_FromLong(i64 {MISMATCH})
  ret ptr %refused
}}
"""


def target_machine(llvm):
    """A target machine as numba's JIT makes one: this CPU and its features, static
    relocations, the JIT's code model."""
    target = llvm.Target.from_default_triple()
    return target.create_target_machine(cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(),
                                        opt=2, reloc="static", codemodel="jitdefault", jit=True)


def entry(compile_result) -> tuple[str, bytes] | None:
    """The native entry of a serial kernel numba has just compiled (its ``CompileResult``):
    ``(argument key, the entry's bytes)``, or None when the kernel cannot have one (an
    argument that is not an array, a symbol its code needs that a process without numba
    lacks, an object format other than ELF, a numba whose pieces differ)."""
    import llvmlite.binding as llvm
    from numba.core import types
    from numba.np.numpy_support import as_dtype
    signature = compile_result.signature
    arguments = list(signature.args)
    if signature.return_type != types.none or not arguments or not all(
            isinstance(argument, types.Array) and argument.layout in "CFA" for argument in arguments):
        return None
    try:
        library, symbol = compile_result.library, compile_result.fndesc.llvm_func_name
        module = library._final_module
        code = library._get_compiled_object()
        undefined = elf_undefined(code)
        if [str(parameter.type) for parameter in module.get_function(symbol).arguments] != _flattened(arguments):
            return None
        ir = str(module)
    except (AttributeError, RuntimeError, ValueError, NameError, struct.error):
        return None
    declared = {match.group(1).strip('"'): match.group(2) for match in _DECLARE.finditer(ir)}
    reached = reachable(ir, symbol)
    process = ctypes.CDLL(None)
    for name in reached & set(declared):
        if name.startswith("llvm."):
            continue
        if name in RUNTIME:
            kinds = ", ".join(parameter.split()[0] for parameter in declared[name].split(",") if parameter.strip())
            if f"({kinds})" != RUNTIME[name].split(" ", 1)[1]:        # (attributes such as signext aside)
                return None
        elif name.startswith(("NRT_", "numba_", "Py", "_Py")) or not _process_symbol(process, name, llvm):
            return None
    dtypes = [as_dtype(argument.dtype) for argument in arguments]
    key = "|".join(f"{dtype.name}:{argument.ndim}{argument.layout}" for dtype, argument in zip(dtypes, arguments))
    name = "flowjit_entry_" + hashlib.sha256(f"{symbol}|{key}".encode()).hexdigest()[:24]
    arrays = [{"ndim": argument.ndim, "itemsize": dtype.itemsize, "nums": _type_nums(dtype),
               "flags": {"C": C_CONTIGUOUS, "F": F_CONTIGUOUS}.get(argument.layout, 0)}
              for dtype, argument in zip(dtypes, arguments)]
    adapter = llvm.parse_assembly(_adapter_ir(name, symbol, arrays))
    adapter.verify()
    adapter_code = target_machine(llvm).emit_object(adapter)
    own = [other for other in elf_undefined(adapter_code) if other not in (symbol, "flowjit_ndarray_type")]
    data = {"format": FORMAT, "entry": name, "arity": len(arguments), "object": code, "adapter": adapter_code,
            "undefined": undefined + own, "wrappers_only": sorted(set(declared) - reached - set(own))}
    return key, pickle.dumps(data, protocol=pickle.HIGHEST_PROTOCOL)


# -- where numba is not loaded: the engine ------------------------------------------------------------
class Engine:
    """One MCJIT engine per process for every native entry, with the runtime functions
    (``RUNTIME``) defined in it: objects added to it find those first, before any symbol
    of the process, so numba's own engine (if numba is imported later) is not affected."""

    def __init__(self):
        import llvmlite.binding as llvm
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        self.llvm, self.lock = llvm, threading.Lock()
        self.engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), target_machine(llvm))
        self.engine.add_module(llvm.parse_assembly(_RUNTIME_IR.format(ndarray=id(np.ndarray))))
        self.engine.finalize_object()
        self.defined = set(RUNTIME) | {"flowjit_ndarray_type"}
        self.stubs: set[str] = set()                    # traps for what only numba's wrappers call
        self.functions: dict[str, object] = {}          # adapter name -> builtin function
        self.definitions: list = []

    def load(self, data: dict):
        """The builtin function of an entry's adapter; None when a symbol its kernel needs is
        not in this process (then nothing of it is added)."""
        with self.lock:
            function = self.functions.get(data["entry"])
            if function is not None:
                return function
            llvm, stubs, wrappers_only = self.llvm, [], set(data["wrappers_only"])
            for name in dict.fromkeys(data["undefined"]):
                if name in self.stubs and name not in wrappers_only:
                    return None                       # (the engine would find its trap first)
                if name in self.defined or name in self.stubs or llvm.address_of_symbol(name):
                    continue
                if name not in wrappers_only:         # something the kernel calls is not in this process
                    return None
                if name not in self.stubs:
                    stubs.append(name)
            if stubs:
                text = "declare void @llvm.trap()\n" + "".join(
                    f'define void @"{name}"() {{\n  call void @llvm.trap()\n  unreachable\n}}\n' for name in stubs)
                self.engine.add_module(llvm.parse_assembly(text))
                self.stubs.update(stubs)
            self.engine.add_object_file(llvm.ObjectFileRef.from_data(data["object"]))
            self.engine.add_object_file(llvm.ObjectFileRef.from_data(data["adapter"]))
            self.engine.finalize_object()
            address = self.engine.get_function_address(data["entry"])
            if not address:
                return None
            definition = _MethodDef(data["entry"].encode(), address, METH_FASTCALL, None)
            self.definitions.append(definition)            # (CPython keeps a pointer to it)
            function = self.functions[data["entry"]] = _new_builtin(ctypes.byref(definition), None, None)
            return function


METH_FASTCALL = 0x80


class _MethodDef(ctypes.Structure):
    """CPython's ``PyMethodDef``."""
    _fields_ = [("ml_name", ctypes.c_char_p), ("ml_meth", ctypes.c_void_p), ("ml_flags", ctypes.c_int),
                ("ml_doc", ctypes.c_char_p)]


_new_builtin = ctypes.pythonapi.PyCFunction_NewEx
_new_builtin.restype, _new_builtin.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]

_ENGINE: list = []
_ENGINE_LOCK = threading.Lock()


def engine() -> Engine | None:
    """This process's engine, made at the first native load; None where numpy's array struct
    is not what the adapters read."""
    with _ENGINE_LOCK:
        if not _ENGINE:
            _ENGINE.append(Engine() if layout_ok() else None)
        return _ENGINE[0]


def entry_path(directory: str, stem: str, key: str) -> str:
    """Where an entry lives: beside numba's files of the kernel (``<stem>.native.<hash>``), so
    that the kernel cache's manifest lists it and clearing the entry removes it."""
    return os.path.join(directory, f"{stem}.native.{hashlib.sha256(key.encode()).hexdigest()[:16]}")


class NativeKernel:
    """A cached kernel's serial function in a process without numba: its native entries, by
    argument key, and ``fallback()`` (numba's dispatcher of the same kernel, imported when
    first needed) for arguments no entry takes and for a kernel that reports an error."""

    def __init__(self, directory: str, stem: str, fallback):
        self.directory, self.stem, self.fallback = directory, stem, fallback
        self.function = None                # the entry the last call ran
        self.entries: dict[str, object] = {}
        self.lock = threading.Lock()

    def __call__(self, *arrays):
        function = self.function
        if function is None:
            return self._other(arrays)
        status = function(*arrays)
        if status is None:
            return None
        return self._other(arrays) if status == MISMATCH else self.fallback()(*arrays)

    def _function(self, key: str | None):
        if key is None:
            return None
        with self.lock:
            if key not in self.entries:
                self.entries[key] = self._load(key)
            return self.entries[key]

    def _load(self, key: str):
        path = entry_path(self.directory, self.stem, key)
        try:
            with open(path, "rb") as stream:
                data = pickle.load(stream)
            if not isinstance(data, dict) or data.get("format") != FORMAT:
                return None
            for code in (data["object"], data["adapter"]):        # (ELF, whole: else llvmlite aborts)
                elf_undefined(code)
            runtime = engine()
            function = runtime.load(data) if runtime is not None else None
        except Exception:           # unreadable, truncated, another format, llvmlite's RuntimeError: numba runs it
            return None
        if function is not None:
            from flowjit.counters import STATS
            STATS.native_loads += 1
        return function

    def _other(self, arrays):
        """Arguments the last entry does not take (or a first call): the entry for their
        types, else numba's dispatcher; a kernel that reports an error runs again there, which
        raises numba's exception."""
        function = self._function(argument_key(arrays))
        if function is not None and function(*arrays) is None:
            self.function = function
            return None
        return self.fallback()(*arrays)          # (a kernel that reported an error runs once more, there)


class Deferred:
    """A callable made when first used or looked into (``make()``): a native kernel's
    parallel twin, numba's dispatcher, which imports numba."""

    def __init__(self, make):
        self._make, self._made, self._lock = make, None, threading.Lock()

    def _get(self):
        if self._made is None:
            with self._lock:
                if self._made is None:
                    self._made = self._make()
        return self._made

    def __call__(self, *arguments):
        return self._get()(*arguments)

    def ready(self) -> bool:
        """Whether it is made (then using it costs nothing more)."""
        return self._made is not None

    def __getattr__(self, name):
        if name.startswith("__") or name in ("_make", "_made", "_lock"):
            raise AttributeError(name)
        return getattr(self._get(), name)
