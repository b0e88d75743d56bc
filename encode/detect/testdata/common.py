"""Helpers shared by the generators: expected ranges are computed here, from
the files' published layouts, independently of the Go detectors."""
import json
import struct
import zipfile

DTYPES = {  # torch storage type -> (label dtype, element width)
    'FloatStorage': ('float32', 4), 'DoubleStorage': ('float64', 8),
    'HalfStorage': ('float16', 2), 'BFloat16Storage': ('bfloat16', 2),
    'ComplexFloatStorage': ('float32', 8), 'ComplexDoubleStorage': ('float64', 16),
    'LongStorage': ('bytes', 8), 'IntStorage': ('bytes', 4), 'ShortStorage': ('bytes', 2),
    'CharStorage': ('bytes', 1), 'ByteStorage': ('bytes', 1), 'BoolStorage': ('bytes', 1),
}


def local_data_offset(raw, header_offset):
    """Offset of a zip member's data, read from its local header."""
    sig, = struct.unpack_from('<I', raw, header_offset)
    assert sig == 0x04034b50, hex(sig)
    n, m = struct.unpack_from('<HH', raw, header_offset + 26)
    return header_offset + 30 + n + m


def zip_members(path):
    raw = open(path, 'rb').read()
    with zipfile.ZipFile(path) as z:
        for info in z.infolist():
            yield info, local_data_offset(raw, info.header_offset)


class Expect:
    def __init__(self):
        self.files = []

    def add(self, name, fmt, tensors):
        # zero-length tensors have no bytes to label
        tensors = [t for t in tensors if t['length'] > 0]
        tensors.sort(key=lambda t: t['offset'])
        self.files.append({'name': name, 'format': fmt, 'tensors': tensors})

    def write(self, path):
        with open(path, 'w') as f:
            json.dump({'files': self.files}, f, indent=1, sort_keys=True)


def tensor(key, dtype, offset, length):
    return {'key': key, 'dtype': dtype, 'offset': offset, 'length': length}
