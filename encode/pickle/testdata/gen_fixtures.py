"""Writes testdata/checkpoint-p<N>.pkl: one checkpoint-like object pickled
by CPython's pickle with each protocol N = 0..5, torch-free (a stand-in
torch module gives the GLOBALs torch.save writes, a Pickler the persistent
ids). Together they hold every opcode CPython writes; pickle_test.go crafts
the others (STRING, BINSTRING, SHORT_BINSTRING, BINUNICODE8, BINBYTES8, DUP,
INST, OBJ).

    python3 testdata/gen_fixtures.py
"""
import collections
import copyreg
import pickle
import sys
import types

torch = types.ModuleType("torch")
utils = types.ModuleType("torch._utils")
torch._utils = utils
sys.modules["torch"] = torch
sys.modules["torch._utils"] = utils


def _make(name, mod):
    cls = type(name, (), {"__module__": mod.__name__})
    setattr(mod, name, cls)
    return cls


FloatStorage = _make("FloatStorage", torch)
HalfStorage = _make("HalfStorage", torch)
UntypedStorage = _make("UntypedStorage", torch)
torch.float16 = _make("float16", torch)  # a dtype, pickled by name as torch.float16


def _rebuild_tensor_v2(*a):
    pass


def _rebuild_tensor_v3(*a):
    pass


_rebuild_tensor_v2.__module__ = "torch._utils"
_rebuild_tensor_v3.__module__ = "torch._utils"
utils._rebuild_tensor_v2 = _rebuild_tensor_v2
utils._rebuild_tensor_v3 = _rebuild_tensor_v3


class Storage:
    def __init__(self, typ, key, numel):
        self.typ, self.key, self.numel = typ, key, numel


class Tensor:
    def __init__(self, storage, v3=False):
        self.storage, self.v3 = storage, v3

    def __reduce__(self):
        n = self.storage.numel
        if self.v3:
            return (_rebuild_tensor_v3, (self.storage, 0, (n,), (1,), torch.float16, False, collections.OrderedDict()))
        return (_rebuild_tensor_v2, (self.storage, 0, (n,), (1,), False, collections.OrderedDict()))


class Point:  # BUILD with a state dict
    def __init__(self):
        self.x, self.y = 1, [2.5, b"by"]


class Kw:  # NEWOBJ_EX (protocol 4+)
    def __new__(cls, *a, **kw):
        return object.__new__(cls)

    def __getnewargs_ex__(self):
        return (1,), {"k": "v"}


Ext1 = _make("Ext1", torch)
Ext2 = _make("Ext2", torch)
Ext4 = _make("Ext4", torch)
copyreg.add_extension("torch", "Ext1", 1)      # EXT1
copyreg.add_extension("torch", "Ext2", 300)    # EXT2
copyreg.add_extension("torch", "Ext4", 70000)  # EXT4


class P(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, Storage):
            return ("storage", obj.typ, obj.key, "cpu", obj.numel)
        return None


def checkpoint(proto):
    w = Tensor(Storage(FloatStorage, "0", 6))
    model = collections.OrderedDict()
    model["fc.weight"] = w
    model["fc.bias"] = Tensor(Storage(FloatStorage, "1", 2))
    model["half"] = Tensor(Storage(UntypedStorage, "2", 8), v3=True)
    opt = {"state": {3: {"exp_avg": Tensor(Storage(HalfStorage, "3", 6)), "step": 10**30}},
           "param_groups": [{"params": [3], "lr": 0.001, "betas": (0.9, 0.999)}]}
    ck = {"model": model, "optimizer": opt, "tied": w, "misc": [None, True, False, -1, 300, -70000, 2**40,
          "é\\x", b"\x00.", frozenset([1]), {2}, Point()]}
    ck["t3"] = (1, 2, 3)
    ck["long"] = -(1 << 2100)  # LONG4 from protocol 2
    ck["blob"] = bytes(range(256)) + b"."  # BINBYTES from protocol 3
    ck["many"] = ["s%d" % i for i in range(260)]  # LONG_BINPUT past 255 memo entries
    late = [7]
    ck["late"], ck["late again"] = late, late  # LONG_BINGET
    ck["ext"] = [Ext1, Ext2, Ext4]
    rec = []
    ck["rec"] = (rec,)  # a tuple inside itself: POP/POP_MARK, then a GET
    rec.append(ck["rec"])
    if proto >= 4:
        ck["kw"] = Kw()
    if proto >= 5:
        ck["buf"] = pickle.PickleBuffer(bytearray(b"abc"))
        ck["ro"] = pickle.PickleBuffer(b"ro")
        ck["ba"] = bytearray(b"in band")
    return ck


import io
import os

here = os.path.dirname(os.path.abspath(__file__))
for proto in range(6):
    b = io.BytesIO()
    if proto == 5:
        p = P(b, protocol=proto, buffer_callback=lambda pb: pb.raw().nbytes > 3)
    else:
        p = P(b, protocol=proto)
    p.dump(checkpoint(proto))
    with open(os.path.join(here, "checkpoint-p%d.pkl" % proto), "wb") as f:
        f.write(b.getvalue())
