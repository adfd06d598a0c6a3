"""A process's own libuls counters, for the helper programs the node and load suites run
under ulsrun (loadconn.py, v6peer.py): the preloaded library exports uls_counters
(apps/preload/preload.map)."""
import ctypes


class UlsCounter(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("value", ctypes.c_uint64)]


def uls_counters(names=None):
    """libuls's counters (only `names`, if given) when running under ulsrun, else {}."""
    try:
        f = ctypes.CDLL(None).uls_counters
    except AttributeError:
        return {}
    f.restype = ctypes.c_int
    arr = (UlsCounter * 1024)()
    n = min(f(arr, 1024), 1024)
    got = {arr[i].name.decode(): arr[i].value for i in range(n)}
    return got if names is None else {k: v for k, v in got.items() if k in names}
