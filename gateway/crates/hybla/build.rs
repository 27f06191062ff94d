//! Builds the BPF objects of `hybla` and `hybla_ld` (clang -target bpf against a vmlinux.h
//! dumped from the build host's kernel BTF) for embedding, and compiles the shared fixed-point header natively for
//! the tests. Links the system libbpf, which the loader drives through FFI.
use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let bpf_dir = manifest.join("../../bpf");
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    for f in [
        "hybla.bpf.c",
        "hybla_ld.bpf.c",
        "hybla_core.bpf.h",
        "hybla_math.h",
        "hybla_params.h",
        "hybla_math_native.c",
    ] {
        println!("cargo:rerun-if-changed={}", bpf_dir.join(f).display());
    }
    for v in ["PERIGEE_VMLINUX_BTF", "CLANG", "BPFTOOL", "LLVM_STRIP"] {
        println!("cargo:rerun-if-env-changed={v}");
    }

    dump_vmlinux_h(&out);
    compile_bpf(&bpf_dir, &out, "hybla");
    compile_bpf(&bpf_dir, &out, "hybla_ld");

    cc::Build::new()
        .file(bpf_dir.join("hybla_math_native.c"))
        .include(&bpf_dir)
        .warnings(true)
        .compile("perigee_hybla_math");
    println!("cargo:rustc-link-lib=dylib=bpf");
}

fn tool(var: &str, default: &str) -> String {
    env::var(var).unwrap_or_else(|_| default.to_string())
}

/// bpftool lives in /usr/sbin on Debian, which an unprivileged build's PATH may lack.
fn bpftool() -> String {
    if let Ok(t) = env::var("BPFTOOL") {
        return t;
    }
    for p in ["/usr/sbin/bpftool", "/usr/bin/bpftool"] {
        if Path::new(p).exists() {
            return p.to_string();
        }
    }
    "bpftool".to_string()
}

fn run(cmd: &mut Command, what: &str) -> Vec<u8> {
    let output = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run {:?}: {e}", cmd.get_program()));
    if !output.status.success() {
        panic!("{what} failed: {}", String::from_utf8_lossy(&output.stderr));
    }
    output.stdout
}

fn dump_vmlinux_h(out: &Path) {
    let btf = tool("PERIGEE_VMLINUX_BTF", "/sys/kernel/btf/vmlinux");
    if !Path::new(&btf).exists() {
        panic!("no kernel BTF at {btf}: building the BPF Hybla needs a BTF-enabled kernel (CONFIG_DEBUG_INFO_BTF=y) or PERIGEE_VMLINUX_BTF=<path to a vmlinux BTF file>");
    }
    let header = run(
        Command::new(bpftool()).args(["btf", "dump", "file", &btf, "format", "c"]),
        "bpftool btf dump (install bpftool, see scripts/apt/hybla.txt)",
    );
    std::fs::write(out.join("vmlinux.h"), header).expect("write vmlinux.h");
}

/// `bpf/<name>.bpf.c` -> `OUT_DIR/<name>.bpf.o`.
fn compile_bpf(bpf_dir: &Path, out: &Path, name: &str) {
    let obj = out.join(format!("{name}.bpf.full.o"));
    let arch = match env::var("CARGO_CFG_TARGET_ARCH").as_deref() {
        Ok("aarch64") => "arm64",
        Ok("x86_64") | Err(_) => "x86",
        Ok(other) => panic!("BPF Hybla: unsupported target arch {other}"),
    };
    run(
        Command::new(tool("CLANG", "clang"))
            .args(["-target", "bpf", "-O2", "-g", "-Wall", "-Werror"])
            .arg(format!("-D__TARGET_ARCH_{arch}"))
            .arg(format!("-I{}", out.display()))
            .arg(format!("-I{}", bpf_dir.display()))
            .arg("-c")
            .arg(bpf_dir.join(format!("{name}.bpf.c")))
            .arg("-o")
            .arg(&obj),
        "clang -target bpf (install clang and libbpf-dev, see scripts/apt/hybla.txt)",
    );
    // Drop DWARF, keep .BTF/.BTF.ext (libbpf needs those for struct_ops and CO-RE).
    let stripped = out.join(format!("{name}.bpf.o"));
    let strip_ok = Command::new(tool("LLVM_STRIP", "llvm-strip"))
        .arg("-g")
        .arg(&obj)
        .arg("-o")
        .arg(&stripped)
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !strip_ok {
        std::fs::copy(&obj, &stripped).expect("copy BPF object");
    }
}
