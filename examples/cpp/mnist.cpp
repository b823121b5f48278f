// MNIST in C++: the small CNN of examples/mnist/train_mnist.py trained with
// libtorch, its gradients averaged with libedt's Communicator directly.
//
//   edtrun -np 2 build/examples/cpp/edt_mnist_cpp --data-dir mnist-data [--epochs 3]
//
// Reads MNIST's IDX files (make them with
// `python3 -m edt.datasets.mnist_synthetic --out mnist-data`, or use real
// MNIST) and prints the same line per epoch and worker as the Python
// example: epoch= rank= size= samples= loss= acc= time=.
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "edt/communicator.h"

namespace {

struct Net : torch::nn::Module {
  Net()
      : conv1(register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 16, 5)))),
        conv2(register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(16, 32, 5)))),
        fc1(register_module("fc1", torch::nn::Linear(32 * 4 * 4, 64))),
        fc2(register_module("fc2", torch::nn::Linear(64, 10))) {}

  torch::Tensor forward(torch::Tensor x) {
    x = torch::max_pool2d(torch::relu(conv1(x)), 2);
    x = torch::max_pool2d(torch::relu(conv2(x)), 2);
    x = torch::relu(fc1(x.flatten(1)));
    return fc2(x);
  }

  torch::nn::Conv2d conv1, conv2;
  torch::nn::Linear fc1, fc2;
};

// An IDX file of unsigned bytes (see edt/datasets/idx.py) as a uint8 tensor.
edt::Result<torch::Tensor> read_idx(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return edt::not_found(path + ": cannot open; make the data with "
                                 "`python3 -m edt.datasets.mnist_synthetic --out DIR`");
  }
  std::vector<unsigned char> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (data.size() < 4 || data[0] != 0 || data[1] != 0 || data[2] != 0x08) {
    return edt::invalid_argument(path + ": not an IDX file of unsigned bytes");
  }
  size_t ndim = data[3];
  std::vector<int64_t> shape;
  size_t count = 1;
  for (size_t d = 0; d < ndim; ++d) {
    const unsigned char* p = data.data() + 4 + 4 * d;
    shape.push_back((int64_t{p[0]} << 24) | (p[1] << 16) | (p[2] << 8) | p[3]);
    count *= static_cast<size_t>(shape.back());
  }
  size_t header = 4 + 4 * ndim;
  if (data.size() != header + count) {
    return edt::invalid_argument(path + ": the header's shape does not match the file size");
  }
  return torch::from_blob(data.data() + header, shape, torch::kUInt8).clone();
}

void check(const edt::Status& s) {
  if (!s.is_ok()) {
    std::fprintf(stderr, "mnist: %s\n", s.to_string().c_str());
    std::exit(1);
  }
}

template <typename T>
T check(edt::Result<T> r) {
  check(r.status());
  return std::move(r).value();
}

}  // namespace

int main(int argc, char** argv) {
  std::string data_dir = "mnist-data";
  int epochs = 3, batch_size = 32;
  double lr = 0.01;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--data-dir" && i + 1 < argc) {
      data_dir = argv[++i];
    } else if (a == "--epochs" && i + 1 < argc) {
      epochs = std::stoi(argv[++i]);
    } else if (a == "--lr" && i + 1 < argc) {
      lr = std::stod(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--data-dir DIR] [--epochs N] [--lr LR]\n", argv[0]);
      return 2;
    }
  }
  torch::set_num_threads(1);
  auto comm = check(edt::Communicator::from_env());
  const int rank = comm->rank(), size = comm->size();

  auto train_x = check(read_idx(data_dir + "/train-images-idx3-ubyte")).to(torch::kFloat32).div_(255).unsqueeze(1);
  auto train_y = check(read_idx(data_dir + "/train-labels-idx1-ubyte")).to(torch::kInt64);
  auto test_x = check(read_idx(data_dir + "/t10k-images-idx3-ubyte")).to(torch::kFloat32).div_(255).unsqueeze(1);
  auto test_y = check(read_idx(data_dir + "/t10k-labels-idx1-ubyte")).to(torch::kInt64);

  torch::manual_seed(42);
  auto model = std::make_shared<Net>();
  for (auto& p : model->parameters()) {  // every rank starts from rank 0's weights
    check(comm->broadcast(p.data_ptr(), p.numel(), edt::DataType::kFloat32, 0));
  }
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(lr * size).momentum(0.9));
  std::vector<torch::Tensor> params = model->parameters();
  int64_t total = 0;
  for (auto& p : params) total += p.numel();
  torch::Tensor flat = torch::empty({total});

  const int64_t n = train_y.size(0);
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    // The same permutation on every rank; rank r takes every size-th sample.
    auto order = torch::randperm(n, torch::TensorOptions().dtype(torch::kInt64)).index(
        {torch::indexing::Slice(rank, n - n % size, size)});
    auto start = std::chrono::steady_clock::now();
    double loss_sum = 0;
    int64_t samples = 0, batches = 0;
    for (int64_t b = 0; b < order.size(0); b += batch_size) {
      auto idx = order.index({torch::indexing::Slice(b, std::min(b + batch_size, order.size(0)))});
      optimizer.zero_grad();
      auto loss = torch::nn::functional::cross_entropy(model->forward(train_x.index({idx})), train_y.index({idx}));
      loss.backward();
      // All gradients in one buffer, averaged in one allreduce.
      int64_t offset = 0;
      for (auto& p : params) {
        flat.narrow(0, offset, p.numel()).copy_(p.grad().flatten());
        offset += p.numel();
      }
      check(comm->allreduce(flat.data_ptr(), flat.data_ptr(), total, edt::DataType::kFloat32, edt::ReduceOp::kAverage));
      offset = 0;
      for (auto& p : params) {
        p.mutable_grad().copy_(flat.narrow(0, offset, p.numel()).view_as(p));
        offset += p.numel();
      }
      optimizer.step();
      loss_sum += loss.item<double>();
      samples += idx.size(0);
      ++batches;
    }
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    double counts[2];
    {
      torch::NoGradGuard no_grad;
      auto share = torch::arange(rank, test_y.size(0), size);
      auto predicted = model->forward(test_x.index({share})).argmax(1);
      counts[0] = predicted.eq(test_y.index({share})).sum().item<double>();
      counts[1] = static_cast<double>(share.size(0));
    }
    check(comm->allreduce(counts, counts, 2, edt::DataType::kFloat64, edt::ReduceOp::kSum));
    std::printf("epoch=%d rank=%d size=%d samples=%lld loss=%.4f acc=%.4f time=%.2f\n", epoch, rank, size,
                static_cast<long long>(samples), loss_sum / std::max<int64_t>(batches, 1), counts[0] / counts[1],
                seconds);
    std::fflush(stdout);
  }
  return 0;
}
