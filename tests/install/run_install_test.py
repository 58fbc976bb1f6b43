#!/usr/bin/env python3
"""install_test: `cmake --install` into a fresh prefix under the build tree, then use the installed
lockstep the way an outside project does, with LOCKSTEP_DATA_DIR unset so that the installed
data (PREFIX/share/lockstep) are what the programs find:

  1. the README's C++, C and Python programs are the files in this folder, word for word;
  2. the prefix holds the headers, libraries, CMake package, lockstep.pc, data and n-gram model;
  3. tests/install/CMakeLists.txt (find_package(lockstep) with CMAKE_PREFIX_PATH=PREFIX) builds
     the C++ program, the C program and a data-lookup probe, and installs them into PREFIX/bin;
     configured again with C alone, it builds the C program (readme_c_only);
  4. the C program is also built with plain `cc $(pkg-config --cflags --libs lockstep)`;
  5. every program runs: the probe and the installed `lockstep` name PREFIX/share/lockstep as the
     data folder (not the source tree), the C++ program prints a date matching its regex, the C
     program (all three builds) and the Python program print JSON matching their schema;
  6. the installed `lockstep --help` works and `lockstep generate` runs on the installed data;
  7. after the prefix is moved, the probe, the C++ program and lockstep.pc follow it.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def run(cmd, env=None, cwd=None):
    start = time.monotonic()
    p = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True)
    took = time.monotonic() - start
    print(f"$ {' '.join(cmd)}   [{took:.1f} s, exit {p.returncode}]", flush=True)
    return p


def check(p, what):
    if p.returncode != 0:
        sys.stdout.write(p.stdout[-4000:])
        sys.stdout.write(p.stderr[-4000:])
        sys.exit(f"FAIL: {what} exited with {p.returncode}")
    return p.stdout


def expect(cond, what):
    if not cond:
        sys.exit(f"FAIL: {what}")
    print(f"ok: {what}", flush=True)


def check_ok_json(text, what):
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        sys.exit(f"FAIL: {what} printed {text!r}, not JSON ({e})")
    expect(isinstance(value, dict) and set(value) == {"ok"} and isinstance(value["ok"], bool),
           f"{what} printed {text.strip()} (matches its schema)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--build-dir", required=True)
    ap.add_argument("--config", default="")
    ap.add_argument("--cmake", required=True)
    ap.add_argument("--c-compiler", required=True)
    ap.add_argument("--cxx-compiler", required=True)
    ap.add_argument("--pkg-config", required=True)
    ap.add_argument("--bindir", required=True)
    ap.add_argument("--libdir", required=True)
    ap.add_argument("--includedir", required=True)
    ap.add_argument("--datadir", required=True)
    ap.add_argument("--cmake-package-dir", required=True)
    ap.add_argument("--cli", action="store_true", help="the lockstep command is built")
    ap.add_argument("--python", default="", help="interpreter, when the module is built")
    ap.add_argument("--python-dir", default="")
    a = ap.parse_args()
    start = time.monotonic()

    work = os.path.join(os.path.abspath(a.build_dir), "install-test")
    prefix = os.path.join(work, "prefix")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    env = dict(os.environ)
    env.pop("LOCKSTEP_DATA_DIR", None)  # the installed programs must find the installed data
    env.pop("PYTHONPATH", None)
    data = os.path.join(prefix, a.datadir, "lockstep")

    # 1. The README shows exactly these programs.
    with open(os.path.join(a.source_dir, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    for name, lang in (("readme_example.cc", "cpp"), ("readme_example.c", "c"),
                       ("readme_example.py", "python")):
        with open(os.path.join(HERE, name), encoding="utf-8") as f:
            code = f.read()
        expect(f"```{lang}\n{code}```\n" in readme, f"README.md shows tests/install/{name}")

    # 2. Install.
    cmd = [a.cmake, "--install", a.build_dir, "--prefix", prefix]
    if a.config:
        cmd += ["--config", a.config]
    check(run(cmd, env), "cmake --install")
    expected = [os.path.join(a.includedir, "lockstep", h)
                for h in ("lockstep_c.h", "lockstep.h", "compiler.h")]
    expected += [os.path.join(a.libdir, f"liblockstep_{lib}.a")
                 for lib in ("capi", "decoder", "automata", "grammar")]
    expected += [os.path.join(a.cmake_package_dir, f)
                 for f in ("lockstepConfig.cmake", "lockstepConfigVersion.cmake",
                           "lockstepTargets.cmake")]
    expected += [os.path.join(a.libdir, "pkgconfig", "lockstep.pc"),
                 os.path.join(a.datadir, "lockstep", "tokenizers", "llama3", "tokenizer.json.gz")]
    if a.cli:
        expected += [os.path.join(a.bindir, "lockstep"),
                     os.path.join(a.datadir, "lockstep", "models", "ngram-llama3.bin")]
    for rel in expected:
        expect(os.path.isfile(os.path.join(prefix, rel)), f"installed {rel}")
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(prefix) for f in fs)
    print(f"installed {size / 1e6:.1f} MB", flush=True)

    # 3. An outside CMake project: C and C++, then C alone.
    for kind, options in (("", []), ("-c-only", ["-DC_ONLY=ON"])):
        app_build = os.path.join(work, "app-build" + kind)
        check(run([a.cmake, "-S", HERE, "-B", app_build, f"-DCMAKE_PREFIX_PATH={prefix}",
                   "-DCMAKE_BUILD_TYPE=Release", f"-DCMAKE_C_COMPILER={a.c_compiler}",
                   f"-DCMAKE_CXX_COMPILER={a.cxx_compiler}",
                   "-DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF"] + options, env),
              f"configuring tests/install {' '.join(options)}")
        with open(os.path.join(app_build, "CMakeCache.txt"), encoding="utf-8") as f:
            found = re.search(r"^lockstep_DIR:PATH=(.*)$", f.read(), re.M)
        expect(found and os.path.samefile(found.group(1),
                                          os.path.join(prefix, a.cmake_package_dir)),
               "find_package(lockstep) found the installed package")
        check(run([a.cmake, "--build", app_build, "-j2"], env), "building tests/install")
        check(run([a.cmake, "--install", app_build, "--prefix", prefix], env),
              "installing tests/install")

    # 4. The C program with plain cc and pkg-config.
    pc_env = dict(env, PKG_CONFIG_PATH=os.path.join(prefix, a.libdir, "pkgconfig"))
    flags = check(run([a.pkg_config, "--cflags", "--libs", "lockstep"], pc_env),
                  "pkg-config --cflags --libs lockstep").split()
    print("  " + " ".join(flags))
    include = os.path.join(prefix, a.includedir)
    expect(any(x.startswith("-I") and os.path.isdir(x[2:]) and os.path.samefile(x[2:], include)
               for x in flags), "lockstep.pc points into the prefix")
    pc_program = os.path.join(prefix, a.bindir, "readme_c_pkgconfig")
    check(run([a.c_compiler, "-std=c11", "-Wall", "-Wextra", "-Werror",
               os.path.join(HERE, "readme_example.c"), "-o", pc_program] + flags, pc_env),
          "cc readme_example.c $(pkg-config --cflags --libs lockstep)")

    # Every installed header, from C++, with pkg-config's flags alone (the outside project's
    # generated all_headers.cc).
    pc_all = os.path.join(prefix, a.bindir, "all_headers_pkgconfig")
    check(run([a.cxx_compiler, "-std=c++20", "-Wall", "-Wextra", "-Werror",
               os.path.join(work, "app-build", "all_headers.cc"), "-o", pc_all] + flags, pc_env),
          "c++ all_headers.cc $(pkg-config --cflags --libs lockstep)")

    # 5. Run them from the prefix, with the source tree's data still on disk.
    bindir = os.path.join(prefix, a.bindir)
    out = check(run([os.path.join(bindir, "data_dir_probe")], env), "data_dir_probe")
    expect(os.path.join(data, "tokenizers") in out,
           f"the installed library looks for data in PREFIX/{a.datadir}/lockstep: {out.strip()}")
    out = check(run([os.path.join(bindir, "readme_cpp")], env), "README C++ program")
    expect(re.fullmatch(r"\d{4}-\d{2}-\d{2}\n", out) is not None,
           f"README C++ program printed {out.strip()} (matches \\d{{4}}-\\d{{2}}-\\d{{2}})")
    for program in ("readme_c", "readme_c_only", "readme_c_pkgconfig"):
        out = check(run([os.path.join(bindir, program)], env), program)
        check_ok_json(out, f"README C program ({program})")
    for program in ("all_headers", "all_headers_pkgconfig"):
        out = check(run([os.path.join(bindir, program)], env), program)
        expect(out == "ok|\n", f"{program} (every installed header, C++ and C ABI) printed {out!r}")
    out = check(run([os.path.join(bindir, "all_headers_c")], env), "all_headers_c")
    expect(out == "[]\n", f"all_headers_c (the C ABI's headers from C) printed {out!r}")

    if a.python:
        module_dir = os.path.join(prefix, a.python_dir)
        py_env = dict(env, PYTHONPATH=module_dir)
        out = check(run([a.python, "-B", os.path.join(HERE, "readme_example.py")], py_env),
                    "README Python program")
        check_ok_json(out, "README Python program")
        probe = ("import lockstep\nprint(lockstep.__file__)\n"
                 "try:\n    lockstep.Vocabulary.load('no-such-vocabulary')\n"
                 "except lockstep.Error as e:\n    print(e)\n")
        out = check(run([a.python, "-B", "-c", probe], py_env), "Python data lookup probe")
        expect(out.startswith(module_dir + os.sep), f"imported the installed module from {module_dir}")
        expect(os.path.join(data, "tokenizers") in out,
               "the installed Python module looks for data in the prefix")
    else:
        print("skipped: the Python module is not built")

    # 6. The installed command.
    if a.cli:
        lockstep = os.path.join(bindir, "lockstep")
        out = check(run([lockstep, "--help"], env), "lockstep --help")
        expect("generate" in out, "lockstep --help lists the commands")
        p = run([lockstep, "tokenize", "--tokenizer", "no-such-vocabulary", "x"], env)
        expect(p.returncode == 2 and os.path.join(data, "tokenizers") in p.stderr,
               "the installed lockstep looks for data in the prefix")
        p = run([lockstep, "generate", "--regex", r"\d{4}-\d{2}-\d{2}", "--seed", "3", "-n", "2",
                 "--json"], env)
        check(p, "lockstep generate")
        lines = [json.loads(line) for line in p.stdout.splitlines()]
        expect(len(lines) == 2 and all(x["match"] for x in lines)
               and all(re.fullmatch(r"\d{4}-\d{2}-\d{2}", x["text"]) for x in lines),
               "the installed lockstep generates with the installed tokenizer and model: "
               + ", ".join(x["text"] for x in lines))
        expect("training" not in p.stderr, "no n-gram model trained at run time")
    # 7. The installed tree still works once moved: the package, lockstep.pc and the data
    # lookup are relative to where they are.
    moved = os.path.join(work, "moved-prefix")
    os.rename(prefix, moved)
    out = check(run([os.path.join(moved, a.bindir, "data_dir_probe")], env), "moved data_dir_probe")
    expect(os.path.join(moved, a.datadir, "lockstep", "tokenizers") in out,
           "a moved installation finds its own data")
    out = check(run([os.path.join(moved, a.bindir, "readme_cpp")], env), "moved README C++ program")
    expect(re.fullmatch(r"\d{4}-\d{2}-\d{2}\n", out) is not None, "and still generates")
    moved_env = dict(env, PKG_CONFIG_PATH=os.path.join(moved, a.libdir, "pkgconfig"))
    flags = check(run([a.pkg_config, "--cflags", "lockstep"], moved_env), "moved pkg-config")
    expect(any(x.startswith("-I") and os.path.isdir(x[2:]) and
               os.path.samefile(x[2:], os.path.join(moved, a.includedir)) for x in flags.split()),
           "lockstep.pc follows the move")
    print(f"install_test passed in {time.monotonic() - start:.1f} s")


if __name__ == "__main__":
    main()
