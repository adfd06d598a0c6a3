# tests/: unit tests (cmocka), conformance (pytest + Scapy), end to end, testbed self-check.
