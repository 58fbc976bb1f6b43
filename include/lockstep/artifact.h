// Compiled artifacts (.lsg): a CompiledGrammar with its mask cache in a versioned binary file,
// so a grammar compiled once (and warmed) can be shared across processes and loaded without
// recompiling. Format and guarantees: docs/artifacts.md.
//
//   header (64 bytes): magic "\x89LSG\r\n\x1a\n", format version, header size, vocabulary
//     fingerprint, vocabulary size, logits width, kind (regex / grammar), payload size, 64-bit
//     checksum of the payload (ArtifactPayloadHash), CRC-32 of the header's first 56 bytes;
//   payload: the compile options, a description of the source, the automaton (a minimal byte
//     DFA, or the lowered grammar program), then the caches as they were when it was written
//     (regex: per-state token masks; grammar: token classes of every computed position,
//     interned parser signatures and their finished masks).
//
// Loading checks the header, the checksum, the vocabulary (by fingerprint: a file written for
// another tokenizer is refused) and then every index and size in the payload before anything
// uses it: a wrong version, a foreign or truncated file, a corrupted byte gives a Status naming
// the byte offset, never a crash.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "lockstep/compiler.h"
#include "lockstep/status.h"

namespace lockstep {

inline constexpr std::uint32_t kArtifactFormatVersion = 7;

struct ArtifactInfo {
  std::uint32_t format_version = 0;
  bool is_grammar = false;
  std::uint64_t vocab_fingerprint = 0;
  std::int32_t vocab_size = 0;
  std::int32_t logits_width = 0;
  std::uint64_t payload_bytes = 0;
  std::string source_kind;  // "regex", "grammar", "schema" or "ir"
  std::string source;       // the constraint's text as given to the compiler (may be empty)
};

// Serialises `grammar` with its caches as they are now (precompute them first to ship them:
// CompiledGrammar::PrecomputeAllMasks). `source_kind` / `source` are stored for inspection.
// Safe while other threads fill masks from the same grammar.
std::string SerializeArtifact(const CompiledGrammar& grammar, std::string_view source_kind = {},
                              std::string_view source = {});
Status WriteArtifactFile(const CompiledGrammar& grammar, const std::string& path,
                         std::string_view source_kind = {}, std::string_view source = {});

// The payload checksum stored at header bytes 48..55 (for tools that build or patch files).
std::uint64_t ArtifactPayloadHash(std::string_view payload);

// Reads the header and the source description (checks magic, version and checksum only).
Result<ArtifactInfo> InspectArtifact(std::string_view bytes);

// Loads an artifact for `compiler`'s vocabulary: kInvalidArtifact (with "byte N" as the
// location) for a malformed, truncated, corrupted or foreign file or one written for another
// vocabulary or format version. The grammar shares `compiler`'s vocabulary and token trie.
Result<std::shared_ptr<const CompiledGrammar>> LoadArtifact(const GrammarCompiler& compiler,
                                                            std::string_view bytes);
// The same from a file (kIoError if it cannot be read; the location names the file).
Result<std::shared_ptr<const CompiledGrammar>> ReadArtifactFile(const GrammarCompiler& compiler,
                                                                const std::string& path);

}  // namespace lockstep
