"""Width helpers, registers, counters, meters and hash algorithms of the engine."""

from __future__ import annotations

import random

import pytest

from softswitch.engine import bits
from softswitch.engine.externs import (
    CRC16_PARAMS,
    GREEN,
    RED,
    YELLOW,
    Counter,
    CrcParams,
    Meter,
    MeterConfig,
    Register,
    crc,
    csum16,
    hash_reduce,
    hash_value,
    pack_fields,
)
from softswitch.errors import TableError

CHECK = b"123456789"

# ----------------------------------------------------------------------------- bits


def test_mask_and_signed_round_trip() -> None:
    """mask/to_signed/from_signed agree on two's-complement patterns."""
    assert bits.mask(0) == 0
    assert bits.mask(9) == 0x1FF
    assert bits.to_signed(0xFF, 8) == -1
    assert bits.to_signed(0x80, 8) == -128
    assert bits.to_signed(0x7F, 8) == 127
    assert bits.from_signed(-1, 16) == 0xFFFF
    assert bits.from_signed(-129, 8) == 0x7F


def test_saturating_unsigned() -> None:
    """|+| and |-| on bit<8> clamp at 255 and 0."""
    assert bits.sat_add_u(200, 100, 8) == 255
    assert bits.sat_add_u(100, 100, 8) == 200
    assert bits.sat_sub_u(5, 10, 8) == 0
    assert bits.sat_sub_u(10, 5, 8) == 5


def test_saturating_signed() -> None:
    """|+| and |-| on int<8> clamp at 127 and -128 (as bit patterns)."""
    assert bits.sat_add_s(100, 100, 8) == 0x7F
    assert bits.sat_add_s(0x80, 0xFF, 8) == 0x80  # -128 + -1
    assert bits.sat_add_s(0xFE, 0x01, 8) == 0xFF  # -2 + 1
    assert bits.sat_sub_s(0x80, 0x01, 8) == 0x80  # -128 - 1
    assert bits.sat_sub_s(0x7F, 0xFF, 8) == 0x7F  # 127 - (-1)
    assert bits.sat_sub_s(0x05, 0x07, 8) == 0xFE


def test_shifts_and_slices() -> None:
    """Shift, arithmetic shift, slice and concat helpers."""
    assert bits.shl(0x81, 1, 8) == 0x02
    assert bits.shl(0x81, 8, 8) == 0
    assert bits.ashr(0x80, 3, 8) == 0xF0
    assert bits.ashr(0x40, 3, 8) == 0x08
    assert bits.ashr(0x80, 9, 8) == 0xFF
    assert bits.get_slice(0xABCD, 11, 4) == 0xBC
    assert bits.set_slice(0xABCD, 11, 4, 0x12) == 0xA12D
    assert bits.concat(0xA, 0x5, 4) == 0xA5
    assert bits.int_to_bytes(0x1FF, 9) == b"\x01\xff"
    assert bits.bytes_to_int(b"\x01\xff") == 0x1FF


# ----------------------------------------------------------------------------- registers


def test_register_masks_values() -> None:
    """Writes are masked to the register width."""
    r = Register("r", 4, 8)
    r.write(1, 0x1234)
    assert r.read(1) == 0x34
    assert r.values == [0, 0x34, 0, 0]


def test_register_out_of_range() -> None:
    """Out-of-range control-plane reads are OUT_OF_RANGE (as BMv2); writes are ignored."""
    r = Register("r", 2, 16)
    r.write(2, 7)
    r.write(-1, 7)
    with pytest.raises(TableError) as err:
        r.read(2)
    assert err.value.code == "OUT_OF_RANGE"
    assert r.values == [0, 0]


# ----------------------------------------------------------------------------- counters


def test_counter_counts_packets_and_bytes() -> None:
    """count() adds one packet and the byte length; out of range is ignored."""
    c = Counter("c", 2, "packets_and_bytes")
    c.count(0, 64)
    c.count(0, 100)
    c.count(5, 100)
    assert c.packets == [2, 0]
    assert c.bytes == [164, 0]
    assert c.read(0) == (2, 164)


def test_counter_write_and_bad_index() -> None:
    """write() sets counts; a bad index on the control plane is OUT_OF_RANGE."""
    c = Counter("c", 1, "bytes")
    c.write(0, 3, 300)
    assert c.read(0) == (3, 300)
    with pytest.raises(TableError) as err:
        c.read(1)
    assert err.value.code == "OUT_OF_RANGE"


def test_counter_rejects_unknown_kind() -> None:
    """Only the v1model counter types are accepted."""
    with pytest.raises(ValueError):
        Counter("c", 1, "octets")


# ----------------------------------------------------------------------------- meters

SEC = 1_000_000_000


def test_unconfigured_meter_is_green() -> None:
    """A meter without configuration marks everything green."""
    m = Meter("m", 2, "packets")
    assert [m.execute(0, 1500, i) for i in range(10)] == [GREEN] * 10


def test_packet_meter_colours() -> None:
    """Packets beyond CBS turn yellow, beyond PBS red (no time passes)."""
    m = Meter("m", 1, "packets")
    m.set_config(0, MeterConfig(cir=1, cburst=2, pir=2, pburst=3))
    colours = [m.execute(0, 100, 0) for _ in range(5)]
    assert colours == [GREEN, GREEN, YELLOW, RED, RED]


def test_packet_meter_refills_with_time() -> None:
    """Tokens return at CIR/PIR per second, capped at the burst sizes."""
    m = Meter("m", 1, "packets")
    m.set_config(0, MeterConfig(cir=1, cburst=1, pir=2, pburst=2))
    assert [m.execute(0, 0, 0) for _ in range(3)] == [GREEN, YELLOW, RED]
    # half a second: peak bucket gains 1 token, committed bucket 0 (0.5 floors to 0)
    assert m.execute(0, 0, SEC // 2) == YELLOW
    assert m.execute(0, 0, SEC // 2) == RED
    # after 10 s both buckets are full again (capped at the bursts)
    assert [m.execute(0, 0, 10 * SEC) for _ in range(3)] == [GREEN, YELLOW, RED]


def test_byte_meter_uses_length() -> None:
    """A bytes meter consumes the packet length in tokens."""
    m = Meter("m", 1, "bytes")
    m.set_config(0, MeterConfig(cir=1000, cburst=1000, pir=2000, pburst=2000))
    assert m.execute(0, 800, 0) == GREEN  # C 200 left, P 1200 left
    assert m.execute(0, 800, 0) == YELLOW  # C short; P 400 left
    assert m.execute(0, 800, 0) == RED  # P short
    assert m.execute(0, 400, 0) == YELLOW  # P 0 left, C still 200


def test_meter_config_reset_and_checks() -> None:
    """Configuration can be read back, reset, and is validated."""
    m = Meter("m", 1, "packets")
    cfg = MeterConfig(1, 1, 1, 1)
    m.set_config(0, cfg)
    assert m.get_config(0) == cfg
    m.set_config(0, None)
    assert m.get_config(0) is None
    with pytest.raises(TableError) as err:
        m.set_config(0, MeterConfig(cir=5, cburst=1, pir=1, pburst=1))
    assert err.value.code == "INVALID_ARGUMENT"
    with pytest.raises(TableError) as err:
        m.set_config(3, cfg)
    assert err.value.code == "OUT_OF_RANGE"


def test_meter_out_of_range_index_is_green() -> None:
    """Executing a meter index past the end answers green."""
    m = Meter("m", 1, "packets")
    m.set_config(0, MeterConfig(0, 0, 0, 0))
    assert m.execute(0, 1, 0) == RED
    assert m.execute(7, 1, 0) == GREEN


# ----------------------------------------------------------------------------- hashes


def test_crc32_check_value() -> None:
    """crc32 is IEEE 802.3: check value 0xCBF43926."""
    assert hash_value("crc32", CHECK) == 0xCBF43926
    assert hash_value("crc32", b"") == 0


def test_crc16_is_arc() -> None:
    """BMv2's crc16 is CRC-16/ARC: check value 0xBB3D."""
    assert hash_value("crc16", CHECK) == 0xBB3D
    assert hash_value("crc16", b"\x00\x01") == 0xC0C1


def test_custom_crcs_default_to_fixed_ones() -> None:
    """crc16_custom / crc32_custom default to crc16 / crc32."""
    assert hash_value("crc16_custom", CHECK) == 0xBB3D
    assert hash_value("crc32_custom", CHECK) == 0xCBF43926


def test_custom_crc_parameters() -> None:
    """Non-default CRC parameters follow BMv2's generic algorithm (catalogue checks)."""
    ccitt_false = CrcParams(16, 0x1021, 0xFFFF, 0x0000, False, False)
    buypass = CrcParams(16, 0x8005, 0x0000, 0x0000, False, False)
    bzip2 = CrcParams(32, 0x04C11DB7, 0xFFFFFFFF, 0xFFFFFFFF, False, False)
    kermit = CrcParams(16, 0x1021, 0x0000, 0x0000, True, True)
    assert hash_value("crc16_custom", CHECK, custom=ccitt_false) == 0x29B1
    assert crc(buypass, CHECK) == 0xFEE8
    assert hash_value("crc32_custom", CHECK, custom=bzip2) == 0xFC891918
    assert crc(kermit, CHECK) == 0x2189
    assert crc(CRC16_PARAMS, CHECK) == 0xBB3D


def test_csum16_values() -> None:
    """csum16 is the Internet checksum; odd lengths pad a zero byte on the right."""
    ipv4 = bytes.fromhex("450000730000400040110000c0a80001c0a800c7")
    assert hash_value("csum16", ipv4) == 0xB861
    assert hash_value("csum16", CHECK) == 0xF62A
    assert csum16(b"\x01") == 0xFEFF
    assert csum16(b"") == 0xFFFF
    assert csum16(b"\xff\xff") == 0x0000


def test_xor16_values() -> None:
    """xor16 XORs big-endian 16-bit words, padding a short tail on the right."""
    assert hash_value("xor16", CHECK) == 0x3908
    assert hash_value("xor16", b"\xab") == 0xAB00
    assert hash_value("xor16", b"\x12\x34\x12\x34") == 0


def test_identity_takes_first_eight_bytes() -> None:
    """identity is the data as a big-endian integer, at most 8 bytes of it."""
    assert hash_value("identity", b"\x0a\x00\x00\x01") == 0x0A000001
    assert hash_value("identity", CHECK) == 0x3132333435363738


def test_random_hash_uses_given_rng() -> None:
    """random draws 64 bits from the caller's generator."""
    assert hash_value("random", b"", rng=random.Random(7)) == random.Random(7).getrandbits(64)


def test_unknown_hash_algorithm() -> None:
    """An unknown algorithm name is a ValueError."""
    with pytest.raises(ValueError):
        hash_value("md5", b"")


def test_hash_reduce() -> None:
    """base + h % max, truncated to the destination; max 0 gives base."""
    assert hash_reduce(0xCBF43926, 0, 16, 16) == 6
    assert hash_reduce(0xCBF43926, 100, 16, 16) == 106
    assert hash_reduce(0xCBF43926, 0xFFFF, 16, 16) == 5
    assert hash_reduce(0xCBF43926, 9, 0, 16) == 9


def test_pack_fields_bit_packing() -> None:
    """Fields are packed MSB first with no alignment; the tail is zero-padded."""
    assert pack_fields([(0x1, 4), (0x2, 4)]) == b"\x12"
    assert pack_fields([(0xABC, 12)]) == b"\xab\xc0"
    assert pack_fields([(0x1, 1)]) == b"\x80"
    assert pack_fields([(0x0A000001, 32), (0x11, 8)]) == b"\x0a\x00\x00\x01\x11"
    assert pack_fields([(0x1F, 5), (0x7FFFF, 19)]) == b"\xff\xff\xff"
    assert pack_fields([]) == b""
