"""``dump-log --key-decoder-class/--value-decoder-class`` (Kafka's ``DecoderMessageParser`` with
``org.apache.kafka.tools.api`` StringDecoder, IntegerDecoder, LongDecoder), on real Kafka logs;
expected keys and values are decoded here with ``struct``."""
from __future__ import annotations

import io
import struct
from pathlib import Path

import pytest

from replica_core.storage.dump import main as dump_log

DATA = Path(__file__).resolve().parent / "data"
V1_OFFSETS = (DATA / "kafka-logs-legacy" / "kafka-0.10.1-zk" / "kafka-logs"
              / "__consumer_offsets-40" / "00000000000000000000.log")
V1_TEXT = (DATA / "kafka-logs-legacy" / "kafka-0.10.1-zk" / "kafka-logs" / "topic1-0"
           / "00000000000000000000.log")
V2_SNAPPY = (DATA / "kafka-logs" / "kafka-2.8.0-zk-snappy" / "kafka-logs" / "some-topic-0"
             / "00000000000000000000.log")


def _run(*args: str) -> tuple[int, list[str], str]:
    out, err = io.StringIO(), io.StringIO()
    code = dump_log(list(args), out=out, err=err)
    return code, out.getvalue().splitlines(), err.getvalue()


def _v1_keys_values(path: Path) -> list[tuple[bytes | None, bytes | None]]:
    data, out, pos = path.read_bytes(), [], 0
    while pos < len(data):
        length = struct.unpack_from(">i", data, pos + 8)[0]
        p = pos + 26                      # offset, size, crc, magic, attributes, timestamp
        fields = []
        for _ in range(2):
            n = struct.unpack_from(">i", data, p)[0]
            fields.append(None if n < 0 else data[p + 4:p + 4 + n])
            p += 4 + max(n, 0)
        out.append(tuple(fields))
        pos += 12 + length
    return out


def test_default_string_decoder_equals_print_data_log():
    code, lines, err = _run(str(V2_SNAPPY), "--value-decoder-class")
    assert code == 0 and err == ""
    assert (code, lines, err) == _run(str(V2_SNAPPY), "--print-data-log")
    assert any(" payload: " in line for line in lines)


def test_integer_and_long_decoders_read_the_leading_bytes_big_endian():
    kv = _v1_keys_values(V1_OFFSETS)
    code, lines, err = _run(str(V1_OFFSETS),
                            "--key-decoder-class", "org.apache.kafka.tools.api.IntegerDecoder",
                            "--value-decoder-class", "kafka.serializer.LongDecoder")
    assert code == 0 and err == ""
    records = [line for line in lines if line.startswith("| offset: ")]
    assert len(records) == len(kv) == 860
    for line, (key, value) in zip(records, kv, strict=True):
        want = f" key: {struct.unpack_from('>i', key)[0]}"
        if value is not None:
            want += f" payload: {struct.unpack_from('>q', value)[0]}"
        assert line.endswith(want), (line, want)


def test_short_value_ends_the_dump_as_kafkas_buffer_underflow(tmp_path):
    """A 3-byte value has no long in it: Kafka's LongDecoder throws and the dump of the file
    stops there; the records before it are printed."""
    from replica_core.records import build_batch

    log = tmp_path / "00000000000000000000.log"
    first = bytearray(build_batch([struct.pack(">q", -5)], timestamps=[1]))
    second = bytearray(build_batch([b"abc"], timestamps=[2]))
    struct.pack_into(">q", second, 0, 1)            # base offset 1 (the CRC does not cover it)
    log.write_bytes(bytes(first + second))
    code, lines, err = _run(str(log), "--value-decoder-class", "LongDecoder")
    assert code == 1 and "BufferUnderflowException" in err
    assert [line for line in lines if line.startswith("| offset: ")] == [
        lines[3]] and lines[3].endswith(" payload: -5")


def test_text_values_through_string_and_integer_decoders():
    code, lines, _ = _run(str(V1_TEXT), "--value-decoder-class", "StringDecoder")
    assert [line.rsplit(" payload: ", 1)[1] for line in lines if "payload" in line] == [
        f"Message_{i}" for i in range(1, 6)]
    code, lines, _ = _run(str(V1_TEXT), "--value-decoder-class", "IntegerDecoder")
    assert code == 0
    assert {line.rsplit(" payload: ", 1)[1] for line in lines if "payload" in line} == {
        str(int.from_bytes(b"Mess", "big"))}


@pytest.mark.parametrize("name", ["kafka.serializer.DefaultDecoder", "com.example.Mine", ""])
def test_unsupported_decoder_class_is_a_usage_error(name):
    code, lines, err = _run(str(V1_TEXT), "--key-decoder-class", name)
    assert code == 2 and lines == []
    assert f"unsupported decoder class {name!r}" in err
