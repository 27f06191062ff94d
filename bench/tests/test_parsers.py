import struct

from bench.scenarios.emulator import pick_lateness
from bench.tools import cpu, tcpinfo
from bench.tools.ss_parse import parse_ss, port_of

SS_OUTPUT = """State Recv-Q Send-Q Local Address:Port Peer Address:Port Process
ESTAB 0      4194304 10.71.3.10:5201 10.71.1.10:41234
\t cubic wscale:14,14 rto:812 rtt:611.2/3.5 ato:40 mss:1448 pmtu:1500 rcvmss:536 advmss:1448 cwnd:2890 ssthresh:1445 bytes_sent:60000000 bytes_retrans:14480 bytes_acked:55000000 segs_out:41437 segs_in:20000 data_segs_out:41437 send 54.8Mbps lastrcv:10000 pacing_rate 65.7Mbps delivery_rate 48.2Mbps delivered:37980 busy:9000ms unacked:3000 retrans:0/10 rcv_space:14480 notsent:100000 minrtt:600.1
ESTAB 0      0 10.71.3.10:22 10.71.1.10:50000
\t bbr wscale:7,7 rto:204 rtt:0.05/0.02 mss:1448 cwnd:10 bytes_acked:1 bbr:(bw:1.2Mbps,mrtt:0.03,pacing_gain:2.88672,cwnd_gain:2.88672) send 2.3Gbps
"""


def test_ss_parsing_extracts_cc_cwnd_rtt():
    socks = parse_ss(SS_OUTPUT)
    assert len(socks) == 2
    first, second = socks
    assert first["local"] == "10.71.3.10:5201" and port_of(first["peer"]) == 41234
    assert first["cc"] == "cubic"
    assert first["cwnd"] == 2890 and first["ssthresh"] == 1445 and first["mss"] == 1448
    assert first["rtt_ms"] == 611.2 and first["rttvar_ms"] == 3.5
    assert first["retrans"] == 10 and first["bytes_acked"] == 55_000_000
    assert first["send_q"] == 4194304
    assert second["cc"] == "bbr" and second["cwnd"] == 10


def test_ss_parsing_without_header_and_ipv6():
    text = "ESTAB 0 0 [fd71:3::10]:5201 [fd71:1::10]:40000\n\t reno cwnd:7 rtt:580/1\n"
    (sock,) = parse_ss(text)
    assert port_of(sock["local"]) == 5201 and sock["cc"] == "reno" and sock["cwnd"] == 7


def test_tcp_info_decoding_reads_the_documented_offsets():
    raw = bytearray(168)
    raw[1] = 4  # TCP_CA_Loss
    struct.pack_into("=I", raw, 68, 600_000)  # rtt µs
    struct.pack_into("=I", raw, 80, 123)  # snd_cwnd
    struct.pack_into("=I", raw, 100, 7)  # total_retrans
    struct.pack_into("=Q", raw, 120, 5_000_000)  # bytes_acked
    info = tcpinfo.decode(bytes(raw))
    assert info["ca_state"] == 4 and info["rtt_us"] == 600_000 and info["snd_cwnd"] == 123
    assert info["total_retrans"] == 7 and info["bytes_acked"] == 5_000_000
    assert "delivery_rate" in info
    assert "delivery_rate" not in tcpinfo.decode(bytes(raw[:104]))  # older kernels: shorter struct


def test_proc_stat_cpu_ticks_with_spaces_in_the_name():
    line = "4242 (satlab link) S 1 4242 4242 0 -1 4194560 100 0 0 0 37 15 0 0 20 0 3 0 1000 0 0"
    assert cpu.parse_stat_cpu_ticks(line) == 52


def test_lateness_keys_are_picked_from_forward_direction():
    found = {
        "forward.lateness_us.p50": 12.0,
        "forward.lateness_us.p99": 80.0,
        "forward.lateness_us.max": 900.0,
        "return.lateness_us.p99": 5.0,
    }
    assert pick_lateness(found) == {
        "lateness_p50": 12.0,
        "lateness_p99": 80.0,
        "lateness_max": 900.0,
    }


def test_ss_parsing_when_the_state_column_is_omitted():
    text = "0       3146576 127.0.0.1:5202  127.0.0.1:45912\n\t cubic rtt:0.065/0.056 cwnd:60 ssthresh:55\n"
    (sock,) = parse_ss(text)
    assert sock["state"] == "" and sock["send_q"] == 3146576 and sock["cwnd"] == 60


def test_ss_parsing_reads_the_sender_limited_times():
    text = (
        "FIN-WAIT-1 0 3000000 10.71.3.10:5201 10.71.1.10:41234\n"
        "\t hybla cwnd:2570 busy:9000ms rwnd_limited:2300ms(25.6%) sndbuf_limited:40ms(0.4%)\n"
    )
    (sock,) = parse_ss(text)
    assert sock["state"] == "FIN-WAIT-1"
    assert (sock["busy_ms"], sock["rwnd_limited_ms"], sock["sndbuf_limited_ms"]) == (
        9000.0,
        2300.0,
        40.0,
    )


def test_tcp_info_decoding_reads_the_limited_times():
    raw = bytearray(192)
    struct.pack_into("=QQQ", raw, 168, 9_000_000, 2_300_000, 40_000)
    info = tcpinfo.decode(bytes(raw))
    assert (
        info["busy_time_us"],
        info["rwnd_limited_us"],
        info["sndbuf_limited_us"],
    ) == (9_000_000, 2_300_000, 40_000)
    assert "rwnd_limited_us" not in tcpinfo.decode(bytes(raw[:168]))


def test_core_busy_ticks_counts_softirq_and_leaves_out_idle_iowait_steal():
    stat = "cpu  10 0 10 100 0 0 10 0 0 0\ncpu0 1 2 3 40 5 6 7 8 0 0\ncpu1 100 0 100 1000 0 0 100 0 0 0\nintr 12345\n"
    # cpu0: user 1 + nice 2 + system 3 + irq 6 + softirq 7 busy; idle 40, iowait 5, steal 8 not.
    assert cpu.core_busy_ticks({0}, stat) == 19
    assert cpu.core_busy_ticks({0, 1}, stat) == 319
    assert cpu.core_busy_ticks({2}, stat) == 0
