// The teaching convolution on CUDA (one thread per output element) against its CPU twin,
// and explain / compare / sweep end to end on the GPU: the kernel log names the cuDNN and
// cuBLAS calls (or the reference kernels when selected), and compare runs CPU and CUDA.
#include <regex>
#include <sstream>

#include "cli_support.h"
#include "devices/conv_impl.h"
#include "devices/kernel_log.h"
#include "conv_support.h"
#include "gpu/gpu_support.h"
#include "layers/zoo.h"

using namespace nnlab;
using namespace nnlab::gputest;

namespace {

struct ConvImplGuard {
  ~ConvImplGuard() { set_conv_impl(ConvImpl::Auto); }
};

// The program's output; its exit code in `exit_code`.
std::string run_cli(const std::string& args, int& exit_code) {
  const nnlab_test::CliResult r = nnlab_test::run_cli(args);
  exit_code = r.exit_code;
  return r.output;
}

// The lines of explain's table that do not depend on time: "fwd c1+pool1+relu1 Conv2d" for a
// node, and each CUDA call on the simulator without its times and with cuDNN's algorithm number
// left out (the simulator's timed search may pick another from run to run).
std::vector<std::string> simulated_cuda_structure(const std::string& output) {
  static const std::regex node(R"(^\d+\s+(fwd|bwd|opt|comm)\s+(\S+)\s+(\S+))");
  static const std::regex times(R"(  [0-9.]+ ms, after [0-9.]+ ms idle$)"), algo("algo=[0-9]+");
  const std::string call = "      [cuda (simulated)] ";
  std::vector<std::string> lines;
  std::istringstream in(output);
  std::smatch m;
  for (std::string line; std::getline(in, line);) {
    if (std::regex_search(line, m, node)) lines.push_back(m[1].str() + " " + m[2].str() + " " + m[3].str());
    else if (line.rfind(call, 0) == 0)
      lines.push_back(std::regex_replace(std::regex_replace(line.substr(call.size()), times, ""), algo, "algo=N"));
  }
  return lines;
}

// The guide's simulator sample (docs/backprop-to-kernels.md, "Without a GPU: the CUDA
// simulator"): the fenced block that starts with `command`.
std::string guide_simulator_sample(const std::string& command) {
  const std::string guide = nnlab_test::read_text(std::string(NNLAB_TEST_DIR) + "/../docs/backprop-to-kernels.md");
  const size_t start = guide.find("$ " + command + "\n");
  if (start == std::string::npos) return "";
  return guide.substr(start, guide.find("```", start) - start);
}

}  // namespace

TEST_CASE("gpu: the reference convolution kernels match the CPU reference", "[gpu][explain]") {
  ConvImplGuard guard;
  set_conv_impl(ConvImpl::Reference);
  const Conv2dGeometry shapes[] = {{2, 3, 8, 8, 4, 3, 3, 1, 1, 1, 1, 8, 8}, {3, 5, 9, 7, 6, 5, 3, 2, 1, 2, 1, 5, 7},
                                   {2, 4, 11, 13, 3, 2, 4, 3, 2, 0, 1, 4, 6}};
  for (const Conv2dGeometry& g : shapes) {
    Tensor x = fresh_tensor({g.n, g.c, g.h, g.w}), w = fresh_tensor({g.k, g.c, g.r, g.s}), b = fresh_tensor({g.k});
    Tensor dy = fresh_tensor({g.n, g.k, g.p, g.q});
    Tensor y = Tensor::empty(dy.shape()), gy = Tensor::empty(dy.shape(), DType::Float32, Device::cuda(0));
    const Tensor gb = on_gpu(b);
    nnlab_test::conv_forward(cpu(), g, x, w, &b, y);
    nnlab_test::conv_forward(gpu(), g, on_gpu(x), on_gpu(w), &gb, gy);
    require_allclose(gy, y, 1e-5, 1e-5, "reference forward");
    Tensor dx = Tensor::empty(x.shape()), gdx = Tensor::empty(x.shape(), DType::Float32, Device::cuda(0));
    nnlab_test::conv_backward_data(cpu(), g, dy, w, dx);
    nnlab_test::conv_backward_data(gpu(), g, on_gpu(dy), on_gpu(w), gdx);
    require_allclose(gdx, dx, 1e-5, 1e-5, "reference backward data");
    Tensor dw = Tensor::empty(w.shape()), gdw = Tensor::empty(w.shape(), DType::Float32, Device::cuda(0));
    nnlab_test::conv_backward_filter(cpu(), g, dy, x, dw);
    nnlab_test::conv_backward_filter(gpu(), g, on_gpu(dy), on_gpu(x), gdw);
    require_allclose(gdw, dw, 1e-5, 1e-4, "reference backward filter");
  }
  set_conv_impl(ConvImpl::Im2col);
  Tensor y = Tensor::empty({1, 1, 3, 3}, DType::Float32, Device::cuda(0));
  const Conv2dGeometry g{1, 1, 3, 3, 1, 1, 1, 1, 1, 0, 0, 3, 3};
  REQUIRE_THROWS_WITH(nnlab_test::conv_forward(gpu(), g, on_gpu(fresh_tensor({1, 1, 3, 3})),
                                               on_gpu(fresh_tensor({1, 1, 1, 1})), nullptr, y),
                      Catch::Contains("im2col is the CPU's path"));
}

TEST_CASE("gpu: explain names the cuDNN, cuBLAS and reference calls; compare runs cpu against cuda",
          "[gpu][explain][compare]") {
  int code = 0;
  // The simulator's times are CPU times: its label says so on every line.
  const std::string cuda_tag = cuda_simulated() ? "[cuda (simulated)]" : "[cuda]";
  const std::string both = run_cli("explain --model cnn --batch 8 --device cpu,cuda", code);
  INFO(both);
  REQUIRE(code == 0);
  CHECK(both.find(cuda_tag + " cudnnConvolutionForward algo=") != std::string::npos);
  CHECK(both.find(cuda_tag + " cudnnConvolutionBackwardFilter algo=") != std::string::npos);
  // f1+relu3's forward: one cuBLASLt call with the bias and the ReLU as its epilogue (the
  // simulator has the algorithm; a GPU's cuBLASLt may not, and then cuBLAS runs the product)
  const std::string fused_f1 = cuda_tag + " cublasLtMatmul (bias+relu) NT 8×128×3136";
  if (cuda_simulated()) CHECK(both.find(fused_f1) != std::string::npos);
  else CHECK((both.find(fused_f1) != std::string::npos || both.find(cuda_tag + " cublasSgemm NT 8×128×3136") != std::string::npos));
  // its backward: dW and db in one call, the bias gradient as the epilogue
  if (cuda_simulated()) CHECK(both.find(cuda_tag + " cublasLtMatmul (bias gradient) TN 128×3136×8") != std::string::npos);
  CHECK(both.find("[cpu] im2col+small_gemm") != std::string::npos);
  if (cuda_simulated()) {  // issue 35: the step's launches and waits, counted
    CHECK(both.find("one eager step hands the device ") != std::string::npos);
    // issue 41: the guide's sample of this command still shows what it prints, in order (the
    // sample leaves rows out, so its lines are a subsequence of the output's)
    const std::string command = "build-sim/nnlab explain --model cnn --batch 8 --device cpu,cuda";
    const std::vector<std::string> want = simulated_cuda_structure(guide_simulator_sample(command));
    const std::vector<std::string> got = simulated_cuda_structure(both);
    REQUIRE(want.size() >= 5);
    size_t at = 0;
    for (const std::string& line : want) {
      while (at < got.size() && got[at] != line) ++at;
      INFO("the guide's line, not printed in this order today: " << line);
      REQUIRE(at < got.size());
      ++at;
    }
  }
  // issue 40: the step on the device's own clock, busy against launched, and as one graph
  CHECK_THAT(both, Catch::Contains("on the device's clock (CUDA events") && Catch::Contains("the GPU idles ") &&
                       Catch::Contains("forward and backward as one CUDA graph"));
  CHECK_THAT(both, !Catch::Contains("the held times above include a wait"));
  // and each cuDNN and cuBLAS call's own device time, on its line, with the device's wait for
  // its launch when queued as training queues it
  CHECK(std::regex_search(both, std::regex("cudnnConvolutionBackwardFilter algo=[0-9]+ x [^\n]* [0-9.]+ ms, after "
                                           "[0-9.]+ ms idle\n")));
  CHECK(std::regex_search(both, std::regex("(cublasLtMatmul \\(bias\\+relu\\)|cublasSgemm) NT 8×128×3136  [0-9.]+ ms, "
                                           "after [0-9.]+ ms idle\n")));
  const std::string ref = run_cli("explain --model cnn --batch 4 --device cuda --conv-impl reference", code);
  REQUIRE(code == 0);
  CHECK(ref.find("conv2d_reference_forward_kernel") != std::string::npos);
  CHECK(ref.find("cudnnConvolution") == std::string::npos);
  const std::string cmp = run_cli("compare --model cnn --devices cpu,cuda --max-steps 3 --batch 8 --test-images 100", code);
  INFO(cmp);
  REQUIRE(code == 0);
  CHECK(cmp.find("drift of " + std::string(cuda_simulated() ? "cuda (simulated)" : "cuda") + " from cpu") != std::string::npos);
}

// Issue 35: every zoo model's step counted in eager and graph mode, as explain prints them.
// Everywhere: each model's forward and backward capture as one graph, whose nodes explain
// names. On the simulator, which counts what the host hands the device, also: eager, one item
// per kernel, copy and library call (more than a dozen for the smallest model); as a graph,
// one replay, one item, no wait, and one node per eager item but the optimizer's (which
// train's graph records too). A GPU's driver keeps no such count.
TEST_CASE("gpu: explain counts every zoo model's step eager and as one graph", "[gpu][explain][graphs]") {
  for (const ModelFile& m : model_zoo()) {
    int code = 0;
    const std::string out = run_cli("explain --model " + m.name + " --batch 2 --device cuda", code);
    INFO(m.name << ": " << out);
    REQUIRE(code == 0);
    std::smatch nodes;
    REQUIRE(std::regex_search(out, nodes, std::regex("as one CUDA graph of ([0-9]+) nodes")));
    CHECK(std::stoi(nodes[1].str()) > 0);
    if (!cuda_simulated()) continue;
    std::smatch eager;
    REQUIRE(std::regex_search(out, eager, std::regex("one eager step hands the device ([0-9]+) items")));
    const int items = std::stoi(eager[1].str());
    CHECK(items >= 12);
    CHECK(std::stoi(nodes[1].str()) == items - 1);  // the eager step's optimizer launch is not in this graph
    CHECK_THAT(out, Catch::Contains("as that graph, the step hands the device 1 item and waits for it 0 times"));
  }
}

// devices/cuda/launch.h: with the log on, each launch of nnlab's own kernels is recorded under
// the call that made it, with its grid and block; a cuBLAS call records none.
TEST_CASE("gpu: the kernel log records each launch's kernel, grid and block", "[gpu][kernel_log]") {
  const Tensor y = on_gpu(fresh_tensor({64, 10})), b = on_gpu(fresh_tensor({10}));
  Tensor out = y.clone(), c = Tensor::empty({64, 64}, DType::Float32, Device::cuda(0));
  KernelLogScope log;
  gpu().bias_forward(out, b, 1);
  gpu().gemm(false, true, 64, 64, 10, 1.0, y, y, 0.0, c);
  const std::vector<KernelCall> calls = take_kernel_calls();
  REQUIRE(calls.size() == 2);
  CHECK(calls[0].family == "bias_forward");
  REQUIRE(calls[0].launches.size() == 1);
  const KernelLaunch& l = calls[0].launches[0];
  CHECK(l.kernel == "bias_forward_kernel");
  // one thread per element (a grid-stride loop): 640 elements in blocks of 256
  CHECK((l.grid.x == 3 && l.block.x == 256 && l.grid.y == 1 && l.block.y == 1));
  CHECK(calls[1].family == "cublasSgemm");
  CHECK(calls[1].launches.empty());
}
