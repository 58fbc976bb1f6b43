#include "cli/artifact_cmd.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/constraint.h"
#include "cli/report.h"
#include "lockstep/artifact.h"
#include "lockstep/matcher.h"

namespace lockstep::cli {
namespace {

namespace fs = std::filesystem;

std::string SourceKind(const Args& args) {
  if (args.Has("schema")) return "schema";
  if (args.Has("grammar")) return "grammar";
  return "regex";
}

// Compile, precompute unless --lazy, write, and load the file back once (a check that it
// round-trips, and the load time a server would see).
struct Made {
  double compile_ms = 0, precompute_ms = 0, write_ms = 0, load_ms = 0;
  std::uint64_t bytes = 0;
  CompiledGrammarStats stats;
};

Result<Made> MakeArtifact(const GrammarCompiler& compiler,
                          const std::function<Result<std::shared_ptr<const CompiledGrammar>>()>& compile,
                          bool lazy, const std::string& out, const std::string& kind,
                          const std::string& source) {
  Made m;
  auto t0 = Clock::now();
  auto g = compile();
  if (!g.ok()) return g.status();
  m.compile_ms = MsSince(t0);
  if (!lazy) {
    t0 = Clock::now();
    (*g)->PrecomputeAllMasks();
    m.precompute_ms = MsSince(t0);
  }
  m.stats = (*g)->Stats();
  t0 = Clock::now();
  LOCKSTEP_RETURN_IF_ERROR(WriteArtifactFile(**g, out, kind, source));
  m.write_ms = MsSince(t0);
  m.bytes = fs::file_size(out);
  t0 = Clock::now();
  auto back = ReadArtifactFile(compiler, out);
  if (!back.ok()) {
    return Status(StatusCode::kInternal, "the artifact just written does not load: " +
                                             back.status().ToString(), out);
  }
  m.load_ms = MsSince(t0);
  return m;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t i = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

void ProgressBar(std::size_t done, std::size_t total, std::size_t failed, const std::string& name) {
  const int width = 30;
  const int fill = total == 0 ? width : static_cast<int>(width * done / total);
  std::string bar(static_cast<std::size_t>(fill), '#');
  bar.resize(width, '.');
  std::string shown = name.size() > 36 ? name.substr(0, 33) + "..." : name;
  std::fprintf(stderr, "\r[%s] %zu/%zu  failed %zu  %-36s", bar.c_str(), done, total, failed,
               shown.c_str());
  if (done == total) std::fprintf(stderr, "\n");
  std::fflush(stderr);
}

}  // namespace

int CompileToArtifact(const Args& args, const CompileOptions& options) {
  auto vocab = LoadVocabulary(args);
  if (!vocab.ok()) return Fail(vocab.status());
  GrammarCompiler compiler(*vocab);
  const std::string out = args.Get("output");
  std::string source = args.Has("regex") ? args.Get("regex") : "";
  if (!args.Has("regex")) {
    auto text = ReadConstraintFile(args.Get(args.Has("schema") ? "schema" : "grammar"),
                                   args.Has("schema") ? "schema" : "grammar");
    if (!text.ok()) return Fail(text.status());
    source = *text;
  }
  auto made = MakeArtifact(
      compiler, [&] { return CompileConstraint(args, compiler, options); }, args.Has("lazy"), out,
      SourceKind(args), source);
  if (!made.ok()) return Fail(made.status());
  const Made& m = *made;
  if (args.Has("json")) {
    nlohmann::ordered_json j = {{"artifact", out},
                                {"constraint", ConstraintLabel(args)},
                                {"tokenizer", (*vocab)->name()},
                                {"format_version", kArtifactFormatVersion},
                                {"bytes", m.bytes},
                                {"precomputed", !args.Has("lazy")},
                                {"compile_ms", m.compile_ms},
                                {"precompute_ms", m.precompute_ms},
                                {"write_ms", m.write_ms},
                                {"load_ms", m.load_ms},
                                {"positions", m.stats.positions},
                                {"cached_masks", m.stats.cached_masks},
                                {"mask_cache_bytes", m.stats.mask_cache_bytes}};
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return 0;
  }
  std::printf("artifact         %s (%.1f KiB, format %u, %s)\n", out.c_str(), m.bytes / 1024.0,
              kArtifactFormatVersion, args.Has("lazy") ? "lazy: no masks" : "every mask precomputed");
  std::printf("constraint       %s\n", ConstraintLabel(args).c_str());
  std::printf("tokenizer        %s\n", (*vocab)->name().c_str());
  std::printf("compile          %.3f ms (+ precompute %.1f ms)\n", m.compile_ms, m.precompute_ms);
  std::printf("write / load     %.3f ms / %.3f ms\n", m.write_ms, m.load_ms);
  if (m.stats.is_grammar) {
    std::printf("positions        %d, %d finished masks cached\n", m.stats.positions,
                m.stats.cached_masks);
  } else {
    std::printf("cached masks     %d of %d states\n", m.stats.cached_masks, m.stats.dfa_states);
  }
  return 0;
}

int CompileBatch(const Args& args, const CompileOptions& batch_options) {
  CompileOptions options = batch_options;
  if (Status st = ApplySchemaFlags(args, &options); !st.ok()) return Fail(st);
  const std::string dir = args.Get("batch");
  const std::string outdir = args.Get("output");
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return Fail(Status(StatusCode::kIoError, "not a directory", dir));
  }
  fs::create_directories(outdir, ec);
  if (!fs::is_directory(outdir, ec)) {
    return Fail(Status(StatusCode::kIoError, "cannot create the output directory", outdir));
  }
  // Inputs: *.json (a JSON Schema, or a MaskBench-style {"schema": ...} file: its schema),
  // *.gbnf and *.lark grammars, sorted by name.
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string ext = e.path().extension().string();
    if (e.is_regular_file() && (ext == ".json" || ext == ".gbnf" || ext == ".lark")) {
      files.push_back(e.path());
    }
  }
  std::sort(files.begin(), files.end());
  auto vocab = LoadVocabulary(args);
  if (!vocab.ok()) return Fail(vocab.status());
  GrammarCompiler compiler(*vocab);
  const bool lazy = args.Has("lazy");
  const bool progress = isatty(STDERR_FILENO) && !args.Has("json");
  struct Failure {
    std::string file, error;
  };
  std::vector<Failure> failures;
  std::vector<double> compile_ms, precompute_ms, load_ms;
  std::uint64_t total_bytes = 0;
  const auto t_all = Clock::now();
  for (std::size_t i = 0; i < files.size(); ++i) {
    const fs::path& p = files[i];
    if (progress) ProgressBar(i, files.size(), failures.size(), p.filename().string());
    auto text = ReadConstraintFile(p.string(), "input");
    if (!text.ok()) {
      failures.push_back({p.filename().string(), text.status().ToString()});
      continue;
    }
    const std::string ext = p.extension().string();
    std::string kind = ext == ".json" ? "schema" : "grammar";
    std::string body = *text;
    if (ext == ".json") {
      auto j = nlohmann::json::parse(body, nullptr, false);
      if (!j.is_discarded() && j.is_object() && j.contains("schema") && j.contains("tests")) {
        body = j["schema"].dump();  // a MaskBench file
      }
    }
    const std::string out = (fs::path(outdir) / p.stem()).string() + ".lsg";
    const CompileOptions& o = options;
    auto made = MakeArtifact(
        compiler,
        [&]() -> Result<std::shared_ptr<const CompiledGrammar>> {
          if (kind == "schema") return compiler.CompileSchema(body, o);
          return compiler.CompileGrammar(body, o, ext == ".lark" ? "lark" : "auto");
        },
        lazy, out, kind, body);
    if (!made.ok()) {
      failures.push_back({p.filename().string(), made.status().ToString()});
      continue;
    }
    compile_ms.push_back(made->compile_ms + made->precompute_ms);
    load_ms.push_back(made->load_ms);
    precompute_ms.push_back(made->precompute_ms);
    total_bytes += made->bytes;
  }
  if (progress) ProgressBar(files.size(), files.size(), failures.size(), "done");
  const double elapsed_s = MsSince(t_all) / 1000.0;
  const std::size_t ok = compile_ms.size();
  if (args.Has("json")) {
    nlohmann::ordered_json fails = nlohmann::ordered_json::array();
    for (const auto& f : failures) fails.push_back({{"file", f.file}, {"error", f.error}});
    auto pct = [](const std::vector<double>& v) {
      return nlohmann::ordered_json{{"p50", Percentile(v, 0.5)}, {"p99", Percentile(v, 0.99)},
                                    {"max", Percentile(v, 1.0)}};
    };
    nlohmann::ordered_json j = {{"inputs", files.size()},
                                {"compiled", ok},
                                {"failed", failures.size()},
                                {"failures", fails},
                                {"precomputed", !lazy},
                                {"compile_ms", pct(compile_ms)},
                                {"load_ms", pct(load_ms)},
                                {"bytes", total_bytes},
                                {"output", outdir},
                                {"elapsed_s", elapsed_s}};
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    std::printf("%-26s %s\n", "inputs", std::to_string(files.size()).c_str());
    std::printf("%-26s %zu -> %s (%.1f MiB)\n", "compiled", ok, outdir.c_str(),
                total_bytes / 1048576.0);
    std::printf("%-26s %zu\n", "failed", failures.size());
    std::printf("%-26s %10s %10s %10s\n", "", "p50", "p99", "max");
    std::printf("%-26s %10.3f %10.3f %10.3f\n",
                lazy ? "compile (ms)" : "compile + precompute (ms)", Percentile(compile_ms, 0.5),
                Percentile(compile_ms, 0.99), Percentile(compile_ms, 1.0));
    std::printf("%-26s %10.3f %10.3f %10.3f\n", "load (ms)", Percentile(load_ms, 0.5),
                Percentile(load_ms, 0.99), Percentile(load_ms, 1.0));
    std::printf("%-26s %.1f s\n", "elapsed", elapsed_s);
    if (!failures.empty()) {
      std::printf("\nfailed:\n");
      for (const auto& f : failures) std::printf("  %s: %s\n", f.file.c_str(), f.error.c_str());
    }
  }
  // Exit 0 when every input compiled, 1 when some failed (each with its reason above).
  return failures.empty() ? 0 : 1;
}

}  // namespace lockstep::cli
