// A minimal trainer-side program on the installed C++ client: lists the
// daemon's datasets, then reads a few batches and prints their tensors.
//
//   g++ -std=c++17 stream_batches.cc $(pkg-config --cflags --libs stoker-client)
//   ./a.out unix:/run/stoker/stoker.sock train train 64 3
#include <cstdio>
#include <cstdlib>
#include <string>

#include "stoker/client.h"

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr,
                 "usage: %s ADDRESS DATASET PIPELINE BATCH_SIZE BATCHES\n",
                 argv[0]);
    return 2;
  }
  std::unique_ptr<stoker::Client> client = stoker::Client::Connect(argv[1]);
  auto datasets = client->ListDatasets();
  if (!datasets.ok()) {
    std::fprintf(stderr, "%s\n", datasets.status().ToString().c_str());
    return 1;
  }
  for (const stoker::DatasetSummary& d : *datasets) {
    std::printf("dataset %s: %llu samples\n", d.name.c_str(),
                static_cast<unsigned long long>(d.num_samples));
  }
  stoker::StreamOptions options;
  options.dataset = argv[2];
  options.pipeline = argv[3];
  options.batch_size = static_cast<uint32_t>(std::atoi(argv[4]));
  auto stream = client->OpenStream(options);
  if (!stream.ok()) {
    std::fprintf(stderr, "%s\n", stream.status().ToString().c_str());
    return 1;
  }
  stoker::Batch batch;
  for (int i = 0; i < std::atoi(argv[5]) && (*stream)->Next(&batch).ok(); ++i) {
    std::printf("batch epoch %llu step %llu:",
                static_cast<unsigned long long>(batch.epoch()),
                static_cast<unsigned long long>(batch.step()));
    for (const stoker::TensorView& t : batch.tensors()) {
      std::printf(" %s[", t.name.c_str());
      for (size_t d = 0; d < t.shape.size(); ++d) {
        std::printf(d ? ",%lld" : "%lld", static_cast<long long>(t.shape[d]));
      }
      std::printf("]");
    }
    std::printf("\n");
  }
  return 0;
}
