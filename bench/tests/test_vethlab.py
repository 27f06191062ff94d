from bench import vethlab


def test_placements_dedicate_cpu0_to_the_end_hosts_and_the_rest_to_the_gateway():
    p = vethlab.placements(4)
    assert p["shared"].endpoint_cpus == p["shared"].gateway_cpus == frozenset({0, 1, 2, 3})
    assert p["dedicated"].endpoint_cpus == frozenset({0})
    assert p["dedicated"].gateway_cpus == frozenset({1, 2, 3})


def test_one_cpu_has_no_dedicated_placement():
    assert list(vethlab.placements(1)) == ["shared"]


def test_pin_runs_each_role_on_its_cpus():
    d = vethlab.placements(2)["dedicated"]
    assert d.pin("gw", ["perigee"]) == ["taskset", "-c", "1", "perigee"]
    assert d.pin("client", ["x"]) == ["taskset", "-c", "0", "x"]
    assert vethlab.placements(3)["shared"].pin("server", ["y"])[:3] == [
        "taskset",
        "-c",
        "0,1,2",
    ]


def test_cpu_mask_is_the_hex_sysfs_takes():
    assert vethlab.cpu_mask(frozenset()) == "0"
    assert vethlab.cpu_mask(frozenset({0})) == "1"
    assert vethlab.cpu_mask(frozenset({1, 2, 3})) == "e"
    assert vethlab.cpu_mask(frozenset(range(8))) == "ff"
