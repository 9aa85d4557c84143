#include "client/cli/dataset_commands.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "server/dataset/importers/importers.h"
#include "server/dataset/manifest.h"
#include "server/dataset/packer.h"
#include "server/dataset/verifier.h"

namespace stoker::cli {
namespace {

using dataset::PackProgress;
using Clock = std::chrono::steady_clock;

std::string FormatBytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = bytes;
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Draws progress on stderr: one line redrawn in place (at most 10 times a
// second) when stderr is a terminal, else a line every 5 seconds. Every
// phase's final count is always shown. Thread-compatible: the packer and
// verifier make one call at a time.
class ProgressBar {
 public:
  ProgressBar() : tty_(isatty(fileno(stderr)) == 1) {}
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;
  ~ProgressBar() { EndLine(); }

  void Update(const PackProgress& p) {
    const Clock::time_point now = Clock::now();
    if (p.phase != phase_) {
      EndLine();
      phase_ = std::string(p.phase);
      phase_start_ = now;
    } else if (p.done < p.total &&
               now - last_draw_ < (tty_ ? std::chrono::milliseconds(100)
                                        : std::chrono::milliseconds(5000))) {
      return;
    }
    last_draw_ = now;
    const double seconds = SecondsSince(phase_start_);
    const double rate = seconds > 0 ? p.done / seconds : 0;
    const double percent = p.total > 0 ? 100.0 * p.done / p.total : 100.0;
    std::fprintf(stderr, "%s%-6s %llu/%llu  %5.1f%%  %.0f %s/s  %s%s",
                 tty_ ? "\r" : "", phase_.c_str(),
                 static_cast<unsigned long long>(p.done),
                 static_cast<unsigned long long>(p.total), percent, rate,
                 phase_ == "verify" ? "records" : "samples",
                 FormatBytes(p.bytes).c_str(), tty_ ? "\x1b[K" : "\n");
    line_open_ = tty_;
  }

 private:
  void EndLine() {
    if (line_open_) std::fputc('\n', stderr);
    line_open_ = false;
  }

  const bool tty_;
  std::string phase_;
  Clock::time_point phase_start_;
  Clock::time_point last_draw_;
  bool line_open_ = false;  // A tty line waits for its newline.
};

void PrintError(const char* command, const absl::Status& status) {
  std::fprintf(stderr, "stoker %s: %s\n", command,
               std::string(status.message()).c_str());
}

struct PackFlags {
  // CLI11 fills positionals in order, so with --list the one path given
  // (DST) lands in `src`.
  std::string src;
  std::string dst;
  std::string list;
  std::string from = "imagefolder";
  std::vector<std::string> fields;
  std::string name;
  int shards = 0;
  int threads = 0;
  std::string on_error = "skip";
  bool force = false;
};

int RunPack(const PackFlags& flags, const dataset::ImageCheck& validate) {
  const bool listed = !flags.list.empty();
  if (flags.src.empty() || (listed ? !flags.dst.empty() : flags.dst.empty())) {
    std::fprintf(stderr, "stoker pack: expected %s\n",
                 listed ? "only DST with --list" : "SRC and DST");
    return 2;
  }
  if (listed && flags.from != "imagefolder" && flags.from != "list") {
    std::fprintf(stderr, "stoker pack: --list FILE is --from list FILE\n");
    return 2;
  }
  std::vector<dataset::FieldFlag> fields;
  for (const std::string& flag : flags.fields) {
    absl::StatusOr<dataset::FieldFlag> f = dataset::ParseFieldFlag(flag);
    if (!f.ok()) {
      PrintError("pack", f.status());
      return 2;
    }
    fields.push_back(*std::move(f));
  }
  absl::StatusOr<std::unique_ptr<dataset::Importer>> importer =
      dataset::MakeImporter(listed ? "list" : flags.from,
                            listed ? flags.list : flags.src, std::move(fields));
  if (!importer.ok()) {
    PrintError("pack", importer.status());
    return 2;
  }
  dataset::PackOptions o;
  o.importer = *std::move(importer);
  o.dst = listed ? flags.src : flags.dst;
  o.name = flags.name;
  o.shards = flags.shards;
  o.threads = flags.threads;
  o.on_error = flags.on_error == "fail" ? dataset::OnError::kFail
                                        : dataset::OnError::kSkip;
  o.force = flags.force;
  o.validate = validate;
  o.notice = [](const std::string& line) {
    std::fprintf(stderr, "stoker pack: %s\n", line.c_str());
  };
  absl::StatusOr<dataset::PackReport> report;
  {
    ProgressBar bar;
    o.progress = [&bar](const PackProgress& p) { bar.Update(p); };
    // Pack returns its errors; an exception from a library it uses is
    // caught here, after Pack's temporary folder was removed on the way out.
    try {
      report = dataset::Pack(o);
    } catch (const std::exception& e) {
      report = absl::InternalError(e.what());
    }
  }
  if (!report.ok()) {
    PrintError("pack", report.status());
    return 1;
  }
  const dataset::Manifest& m = report->manifest;
  uint64_t bytes = 0;
  for (const dataset::ShardInfo& s : m.shards) bytes += s.bytes;
  std::printf(
      "packed '%s' into %s: %llu samples, %zu classes, %zu shards, %s in "
      "%.1f s (%.0f samples/s)\n",
      m.name.c_str(), o.dst.c_str(),
      static_cast<unsigned long long>(m.num_samples), m.classes.size(),
      m.shards.size(), FormatBytes(bytes).c_str(), report->seconds,
      report->seconds > 0 ? m.num_samples / report->seconds : 0.0);
  if (!report->skipped.empty()) {
    std::printf("skipped %zu samples:\n", report->skipped.size());
    for (const dataset::SkippedFile& f : report->skipped) {
      std::printf("  %s: %s\n", f.path.c_str(), f.reason.c_str());
    }
  }
  return 0;
}

int RunVerify(const std::string& dir, bool decode,
              const dataset::ImageCheck& validate) {
  const Clock::time_point start = Clock::now();
  absl::StatusOr<dataset::VerifyReport> report;
  {
    ProgressBar bar;
    report = dataset::Verify(
        dir, [&bar](const PackProgress& p) { bar.Update(p); },
        decode ? validate : nullptr);
  }
  if (!report.ok()) {
    PrintError("verify", report.status());
    return 1;
  }
  std::printf("verified %s: %llu good records, %s, %zu errors in %.1f s\n",
              dir.c_str(), static_cast<unsigned long long>(report->records),
              FormatBytes(report->bytes).c_str(), report->errors.size(),
              SecondsSince(start));
  for (const std::string& e : report->errors) std::printf("  %s\n", e.c_str());
  return report->errors.empty() ? 0 : 1;
}

int RunInspect(const std::string& dir, bool json) {
  absl::StatusOr<dataset::Manifest> m = dataset::ReadManifest(dir);
  if (!m.ok()) {
    PrintError("inspect", m.status());
    return 1;
  }
  if (json) {
    std::fputs(dataset::SerializeManifest(*m).c_str(), stdout);
    return 0;
  }
  std::string fields;
  for (const dataset::FieldSpec& f : m->fields) {
    if (!fields.empty()) fields += ", ";
    fields += dataset::DescribeField(f);
  }
  constexpr size_t kShownClasses = 10;
  std::string classes = std::to_string(m->classes.size());
  for (size_t i = 0; i < m->classes.size() && i < kShownClasses; ++i) {
    classes += (i == 0 ? ": " : ", ") + m->classes[i];
  }
  if (m->classes.size() > kShownClasses) {
    classes += ", ... (" + std::to_string(m->classes.size() - kShownClasses) +
               " more; --json lists all)";
  }
  uint64_t bytes = 0;
  for (const dataset::ShardInfo& s : m->shards) bytes += s.bytes;
  std::printf(
      "name     %s\nfolder   %s\nformat   %d\nsamples  %llu\n"
      "fields   %s\nclasses  %s\ncreated  %s\nsource   %s\n"
      "shards   %zu, %s in all\n",
      m->name.c_str(), dir.c_str(), m->format_version,
      static_cast<unsigned long long>(m->num_samples), fields.c_str(),
      classes.c_str(), m->created.c_str(), m->source.c_str(), m->shards.size(),
      FormatBytes(bytes).c_str());
  std::printf("  %-20s %12s %10s %12s\n", "file", "first id", "samples",
              "size");
  for (const dataset::ShardInfo& s : m->shards) {
    std::printf("  %-20s %12llu %10llu %12s\n", s.file.c_str(),
                static_cast<unsigned long long>(s.first_id),
                static_cast<unsigned long long>(s.num_samples),
                FormatBytes(s.bytes).c_str());
  }
  return 0;
}

// Hands a command's non-zero result to CLI11_PARSE as the exit code.
void ExitWith(int rc) {
  if (rc != 0) throw CLI::RuntimeError(rc);
}

}  // namespace

void AddDatasetCommands(CLI::App& app, dataset::ImageCheck validate_image) {
  auto validate =
      std::make_shared<const dataset::ImageCheck>(std::move(validate_image));

  CLI::App* pack = app.add_subcommand(
      "pack",
      "Pack a source into a dataset: LMDB shards plus a manifest, with a "
      "checksum on every record. --from says what SRC is: 'imagefolder' "
      "(default: SRC/<class>/.../<file>; labels number the sorted class "
      "names; hidden files are ignored), 'list' (a 'path,label' file, or "
      "with --field a CSV with a header row or a .jsonl manifest of typed "
      "columns), 'webdataset' (a .tar, a folder of them or a glob; members "
      "grouped by key: jpg/jpeg/png/webp -> image, cls -> label, json/txt "
      "-> str, npy -> ndarray), 'tfrecord' (tf.train.Example files; "
      "image/encoded -> image, image/class/label -> label; both CRCs "
      "checked) or 'efficient-pytorch-lmdb' (folder2lmdb.py's LMDB, msgpack "
      "or pickle values; a pickle that would construct an object is "
      "refused, nothing in it runs). Writes into DST.tmp-<pid> and renames "
      "it to DST at the end.");
  auto pack_flags = std::make_shared<PackFlags>();
  pack->add_option("SRC", pack_flags->src,
                   "What to read (see --from); leave it out with --list");
  pack->add_option("DST", pack_flags->dst,
                   "The dataset folder to create; must not exist unless "
                   "--force");
  pack->add_option("--from", pack_flags->from,
                   "The format of SRC: imagefolder (default), list, "
                   "webdataset, tfrecord, efficient-pytorch-lmdb")
      ->check(CLI::IsMember(dataset::ImporterKinds()))
      ->option_text("KIND");
  pack->add_option("--list", pack_flags->list,
                   "Same as --from list FILE: one 'path,label' per line, "
                   "label an integer, relative paths relative to FILE's "
                   "folder, '#' lines and blank lines ignored; ids follow "
                   "the file's order")
      ->option_text("FILE");
  pack->add_option(
          "--field", pack_flags->fields,
          "A typed field, repeatable: NAME[=SOURCE]:KIND with KIND one of "
          "image, "
          "int64, float32, float64, str, bytes, or NAME:ndarray:DTYPE:SHAPE "
          "with DTYPE bool, uint8, int8, uint16, int16, int32, int64, "
          "float16, float32 or float64 and SHAPE's dimensions joined by 'x', "
          "only the first may be -1 (tokens:ndarray:int32:-1, "
          "boxes:ndarray:float32:-1x4, emb:ndarray:float16:512). SOURCE "
          "(default NAME) is what the field reads: with --from list the "
          "manifest's column, fields in flag order; an image or bytes cell "
          "is a path relative to the manifest's folder, the others inline "
          "text (an ndarray as numbers, e.g. a JSON array). With webdataset "
          "a member extension (class=cls:int64 renames label; "
          "label:float32 retypes it). With tfrecord a feature key "
          "(xmin=image/object/bbox/xmin:ndarray:float32:-1)")
      ->option_text("SPEC");
  pack->add_option("--shards", pack_flags->shards,
                   "Number of shard files; 0 (default) makes one per 256 MiB "
                   "of images. Never more than the number of samples")
      ->check(CLI::NonNegativeNumber);
  pack->add_option("--threads", pack_flags->threads,
                   "Threads reading, checking and writing; 0 (default) uses "
                   "one per core. Each thread holds about three times the "
                   "sample it works on (a 1 GiB sample: about 3 GiB), so "
                   "peak memory is about 3 x threads x the largest sample: "
                   "lower it for huge samples")
      ->check(CLI::NonNegativeNumber);
  pack->add_option("--on-error", pack_flags->on_error,
                   "What to do with a bad sample: an unreadable, empty or "
                   "undecodable image (neither JPEG nor PNG, by content), a "
                   "value its field's kind refuses, a TFRecord with a bad "
                   "CRC, a refused pickle: "
                   "'skip' (default) leaves it out and lists it at the end; "
                   "'fail' stops at the first one and leaves nothing behind")
      ->check(CLI::IsMember({"skip", "fail"}));
  pack->add_option("--name", pack_flags->name,
                   "Dataset name recorded in the manifest (default: the base "
                   "name of DST)");
  pack->add_flag("--force", pack_flags->force,
                 "Replace DST if it already holds a dataset; a folder without "
                 "a manifest.json is never replaced");
  pack->callback(
      [pack_flags, validate] { ExitWith(RunPack(*pack_flags, *validate)); });

  CLI::App* verify = app.add_subcommand(
      "verify",
      "Check every record of a dataset: manifest, shard sizes, keys, "
      "checksums. Lists every problem by shard file and key and exits with 1 "
      "if there is any.");
  auto verify_dir = std::make_shared<std::string>();
  auto decode = std::make_shared<bool>(false);
  verify->add_option("DST", *verify_dir, "The dataset folder to check")
      ->required();
  verify->add_flag("--decode", *decode,
                   "Also fully decode every stored image, JPEG or PNG (slower)");
  verify->callback([verify_dir, decode, validate] {
    ExitWith(RunVerify(*verify_dir, *decode, *validate));
  });

  CLI::App* inspect = app.add_subcommand(
      "inspect",
      "Print a dataset's manifest: name, format version, sample count, "
      "fields with their kinds (an image field with its formats), classes "
      "(the first 10), and each shard's id range, count and size.");
  auto inspect_dir = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  inspect->add_option("DST", *inspect_dir, "The dataset folder to describe")
      ->required();
  inspect->add_flag("--json", *json,
                    "Print the whole manifest as JSON instead of a summary");
  inspect->callback(
      [inspect_dir, json] { ExitWith(RunInspect(*inspect_dir, *json)); });
}

}  // namespace stoker::cli
