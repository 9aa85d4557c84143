// stoker_bench: the C++ parts of bench/run, bench/formats and bench/ops, one
// binary with four commands.
// Each prints one JSON object on stdout.
//
//   stoker_bench decode DIR --threads N [--decoder turbojpeg|stoker]
//       The decode-only limit: every JPEG under DIR read into memory, then
//       fully decoded to RGB with TurboJPEG (tjDecompress2, no scaling, no
//       cropping) by N threads that take images off a shared counter.
//       --decoder stoker decodes every JPEG, PNG, WebP and TIFF under DIR
//       instead, whole and at full size, through the daemon's own decoders
//       (DecoderSet: chosen by content, as a stream decodes): bench/formats
//       sets that against PIL on the same files.
//   stoker_bench memcpy --bytes B --seconds S
//       Copy bandwidth of one thread between two B-byte buffers, both
//       touched first: what a copy of one batch costs at best.
//   stoker_bench consume --address A --dataset D --pipeline P ...
//       A trainer's data loop through the C++ client: Next() and nothing
//       else (a trainer does not hash its batches). --digest adds the XXH3
//       content digest of every tensor byte, as `stoker stream` reports it,
//       for checks.
//   stoker_bench ops --image FILE --width W --height H [--seconds S]
//       Each pixel and tensor op of today's recipes timed alone on one
//       W x H RGB image (op_costs.h); bench/ops runs torchvision's beside it.
//
// CPU seconds are this process's getrusage(RUSAGE_SELF) over the measured
// part: for consume, from before connecting to the end of the stream. Closing
// the stream and letting go of the last batch follow, reported apart as
// teardown_cpu_seconds (over shm, the process that lets go of the ring last
// pays for freeing its pages, once per stream).
#include <sys/resource.h>
#include <turbojpeg.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_format.h"
#include "bench/op_costs.h"
#include "nlohmann/json.hpp"
#include "server/pipeline/decoders/decoder_set.h"
#include "stoker/client.h"

namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

double CpuSeconds() {
  rusage r{};
  getrusage(RUSAGE_SELF, &r);
  return r.ru_utime.tv_sec + r.ru_stime.tv_sec +
         (r.ru_utime.tv_usec + r.ru_stime.tv_usec) * 1e-6;
}

std::string LowerExtension(const std::filesystem::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), ::tolower);
  return ext;
}

bool IsJpeg(const std::filesystem::path& p) {
  const std::string ext = LowerExtension(p);
  return ext == ".jpg" || ext == ".jpeg";
}

bool IsImage(const std::filesystem::path& p) {
  const std::string ext = LowerExtension(p);
  return IsJpeg(p) || ext == ".png" || ext == ".webp" || ext == ".tif" ||
         ext == ".tiff";
}

// What one decoding thread keeps from one image to the next, as a worker
// of the daemon keeps its decode buffer.
struct DecodeThread {
  tjhandle tj = nullptr;
  std::vector<unsigned char> rgb;
  stoker::pipeline::DecodedWindow window;
};

// Decodes one image whole, at full size, to RGB; false when it fails. Adds
// its pixel count to *pixels.
using DecodeFn = bool (*)(DecodeThread& thread, const std::string& blob,
                          uint64_t* pixels);

bool DecodeTurboJpeg(DecodeThread& thread, const std::string& blob,
                     uint64_t* pixels) {
  tjhandle tj = thread.tj;
  std::vector<unsigned char>& rgb = thread.rgb;
  const auto* data = reinterpret_cast<const unsigned char*>(blob.data());
  int w = 0, h = 0, sub = 0, cs = 0;
  if (tjDecompressHeader3(tj, data, blob.size(), &w, &h, &sub, &cs) != 0) {
    return false;
  }
  rgb.resize(static_cast<size_t>(w) * h * 3);
  if (tjDecompress2(tj, data, blob.size(), rgb.data(), w, 0, h, TJPF_RGB, 0) !=
      0) {
    return false;
  }
  *pixels += static_cast<uint64_t>(w) * h;
  return true;
}

bool DecodeStoker(DecodeThread& thread, const std::string& blob,
                  uint64_t* pixels) {
  stoker::pipeline::DecoderSet set;
  absl::StatusOr<stoker::pipeline::ImageDecoder*> decoder = set.Open(blob);
  if (!decoder.ok()) return false;
  const int w = (*decoder)->width(), h = (*decoder)->height();
  if (!(*decoder)->DecodeWindow(8, {0, 0, w, h}, &thread.window).ok()) {
    return false;
  }
  *pixels += static_cast<uint64_t>(w) * h;
  return true;
}

int Decode(const std::string& dir, int threads, const std::string& decoder) {
  const bool stoker = decoder == "stoker";
  std::vector<std::string> paths;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (e.is_regular_file() &&
        (stoker ? IsImage(e.path()) : IsJpeg(e.path()))) {
      paths.push_back(e.path());
    }
  }
  std::sort(paths.begin(), paths.end());
  if (paths.empty()) {
    std::fprintf(stderr, "stoker_bench decode: no %s files under %s\n",
                 stoker ? "JPEG, PNG, WebP or TIFF" : "JPEG", dir.c_str());
    return 1;
  }
  std::vector<std::string> blobs;
  uint64_t bytes = 0;
  for (const std::string& p : paths) {
    std::ifstream in(p, std::ios::binary);
    blobs.emplace_back(std::istreambuf_iterator<char>(in),
                       std::istreambuf_iterator<char>());
    bytes += blobs.back().size();
  }
  const DecodeFn decode = stoker ? DecodeStoker : DecodeTurboJpeg;
  std::atomic<size_t> next{0};
  std::atomic<uint64_t> pixels{0};
  std::atomic<int> failures{0};
  const double cpu0 = CpuSeconds();
  const Clock::time_point start = Clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      DecodeThread thread;
      if (!stoker) thread.tj = tjInitDecompress();
      uint64_t mine = 0;
      for (size_t i = next++; i < blobs.size(); i = next++) {
        if (!decode(thread, blobs[i], &mine)) ++failures;
      }
      pixels += mine;
      if (thread.tj != nullptr) tjDestroy(thread.tj);
    });
  }
  for (std::thread& t : pool) t.join();
  const double seconds = Seconds(start);
  const double cpu = CpuSeconds() - cpu0;
  const size_t images = blobs.size() - failures;
  nlohmann::json out = {
      {"decoder", stoker
                      ? "Stoker's decoders (DecoderSet), whole image, full "
                        "size, RGB, from memory"
                      : "TurboJPEG tjDecompress2, full size, RGB, from memory"},
      {"threads", threads},
      {"images", images},
      {"expected_images", blobs.size()},
      {"failures", failures.load()},
      {"bytes", bytes},
      {"megapixels", pixels / 1e6},
      {"seconds", seconds},
      {"images_per_second", seconds > 0 ? images / seconds : 0.0},
      {"megapixels_per_second", seconds > 0 ? pixels / 1e6 / seconds : 0.0},
      {"cpu_seconds", cpu}};
  std::printf("%s\n", out.dump().c_str());
  return failures == 0 ? 0 : 1;
}

int Memcpy(uint64_t bytes, double min_seconds) {
  std::vector<unsigned char> a(bytes, 1), b(bytes, 2);
  std::memcpy(b.data(), a.data(), bytes);  // Warm both.
  uint64_t copies = 0;
  const Clock::time_point start = Clock::now();
  double seconds = 0;
  while ((seconds = Seconds(start)) < min_seconds || copies < 3) {
    std::memcpy(copies % 2 ? a.data() : b.data(), copies % 2 ? b.data() : a.data(),
                bytes);
    ++copies;
  }
  // Keeps the copies from being optimised away.
  const unsigned sink = a[bytes / 2] + b[bytes / 3];
  nlohmann::json out = {{"bytes", bytes},
                        {"copies", copies},
                        {"seconds", seconds},
                        {"gb_per_second", bytes * copies / seconds / 1e9},
                        {"sink", sink}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

struct ConsumeFlags {
  std::string address;
  stoker::StreamOptions options;
  uint64_t max_batches = 0;
  bool digest = false;
  int step_ms = 0;  // A trainer's step: sleep this long after each batch.
};

// Seconds since the epoch: comparable across the processes of one run.
double UnixSeconds() {
  return std::chrono::duration<double>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int Consume(const ConsumeFlags& f) {
  const double start_unix = UnixSeconds();
  const Clock::time_point start = Clock::now();
  const double cpu0 = CpuSeconds();
  std::unique_ptr<stoker::Client> client = stoker::Client::Connect(f.address);
  auto stream = client->OpenStream(f.options);
  if (!stream.ok()) {
    std::fprintf(stderr, "stoker_bench consume: %s\n",
                 stream.status().ToString().c_str());
    return 1;
  }
  XXH3_state_t* digest = XXH3_createState();
  XXH3_64bits_reset(digest);
  uint64_t samples = 0, batches = 0, bytes = 0, first_samples = 0;
  uint64_t shared = 0;
  double first = 0;
  stoker::Batch batch;
  absl::Status status;
  std::vector<double> next_seconds;  // Time inside each Next().
  while (f.max_batches == 0 || batches < f.max_batches) {
    const Clock::time_point asked = Clock::now();
    status = (*stream)->Next(&batch);
    if (!status.ok()) break;
    next_seconds.push_back(Seconds(asked));
    if (batches++ == 0) {
      first = Seconds(start);
      first_samples = batch.sample_ids().size();
    }
    samples += batch.sample_ids().size();
    shared += batch.shared() ? 1 : 0;
    for (const stoker::TensorView& t : batch.tensors()) {
      if (f.digest) XXH3_64bits_update(digest, t.data, t.size);
      bytes += t.size;
    }
    if (f.step_ms > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(f.step_ms));
    }
  }
  const double seconds = Seconds(start);
  const double cpu = CpuSeconds() - cpu0;
  const uint64_t hash = XXH3_64bits_digest(digest);
  XXH3_freeState(digest);
  const bool ended = status.ok() || absl::IsOutOfRange(status);
  std::sort(next_seconds.begin(), next_seconds.end());
  nlohmann::json out = {
      {"next_seconds_median",
       next_seconds.empty() ? 0.0 : next_seconds[next_seconds.size() / 2]},
      {"step_ms", f.step_ms},
      {"samples", samples},
      {"batches", batches},
      {"shared_batches", shared},
      {"bytes", bytes},
      {"seconds", seconds},
      {"samples_per_second", seconds > 0 ? samples / seconds : 0.0},
      {"steady_samples_per_second",
       batches > 1 && seconds > first
           ? (samples - first_samples) / (seconds - first)
           : 0.0},
      {"first_batch_seconds", first},
      {"start_unix", start_unix},
      {"end_unix", start_unix + seconds},
      {"cpu_seconds", cpu},
      {"transport", (*stream)->info().transport},
      {"status", ended ? "OK" : status.ToString()}};
  if (f.digest) out["content_digest"] = absl::StrFormat("%016x", hash);
  batch = stoker::Batch();
  stream->reset();
  client.reset();
  out["teardown_cpu_seconds"] = CpuSeconds() - cpu0 - cpu;
  std::printf("%s\n", out.dump().c_str());
  return ended ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app(
      "stoker_bench: decode-only limit, memcpy bandwidth, a "
      "non-hashing C++ consumer and op costs for bench/run, "
      "bench/formats and bench/ops");
  app.require_subcommand(1);

  std::string dir;
  int threads = 1;
  std::string decoder = "turbojpeg";
  CLI::App* decode = app.add_subcommand("decode", "Full-size decode only");
  decode->add_option("dir", dir, "Folder of images")->required();
  decode->add_option("--threads", threads, "Decoding threads");
  decode
      ->add_option("--decoder", decoder,
                   "turbojpeg: the JPEGs through tjDecompress2; stoker: "
                   "every JPEG, PNG, WebP and TIFF through the daemon's "
                   "decoders")
      ->check(CLI::IsMember({"turbojpeg", "stoker"}));

  uint64_t bytes = 256ull * 3 * 224 * 224;
  double seconds = 1.0;
  CLI::App* copy = app.add_subcommand("memcpy", "One-thread copy bandwidth");
  copy->add_option("--bytes", bytes, "Buffer size");
  copy->add_option("--seconds", seconds, "Least time to copy for");

  ConsumeFlags f;
  stoker::StreamOptions& o = f.options;
  CLI::App* consume = app.add_subcommand("consume", "Consume a stream");
  consume->add_option("--address", f.address, "e.g. unix:/tmp/s.sock")->required();
  consume->add_option("--dataset", o.dataset)->required();
  consume->add_option("--pipeline", o.pipeline)->required();
  consume->add_option("--batch-size", o.batch_size)->required();
  consume->add_option("--epochs", o.epochs);
  consume->add_option("--seed", o.seed);
  consume->add_option("--prefetch", o.prefetch);
  consume->add_option("--transport", o.transport);
  consume->add_option("--job-id", o.job_id);
  consume->add_option("--rank", o.rank);
  consume->add_option("--world-size", o.world_size);
  consume->add_flag("--drop-last", o.drop_last);
  consume->add_flag("--share", o.share, "Join a shared preprocessing run");
  consume->add_option("--max-batches", f.max_batches);
  consume->add_flag("--digest", f.digest, "XXH3 of every tensor byte");
  consume->add_option("--step-ms", f.step_ms,
                      "Sleep after each batch, as a trainer's step");

  std::string image;
  int width = 224, height = 224;
  double op_seconds = 0.5;
  CLI::App* ops = app.add_subcommand("ops", "Each recipe op alone, one image");
  ops->add_option("--image", image, "Raw RGB bytes, rows packed")->required();
  ops->add_option("--width", width, "Image width")->check(CLI::PositiveNumber);
  ops->add_option("--height", height, "Image height")
      ->check(CLI::PositiveNumber);
  ops->add_option("--seconds", op_seconds, "Least time per op");
  std::string only;
  ops->add_option("--only", only, "Time this op alone (for a profiler)");

  CLI11_PARSE(app, argc, argv);
  if (*decode) return Decode(dir, std::max(1, threads), decoder);
  if (*ops) return stoker::bench::OpCosts(image, width, height, op_seconds, only);
  if (*copy) return Memcpy(std::max<uint64_t>(1, bytes), seconds);
  return Consume(f);
}
