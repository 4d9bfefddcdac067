#include "apps/run_variant.h"

#include <sstream>

#include "core/error.h"
#include "devices/host_cpu.h"
#include "devices/registry.h"

namespace nnlab {

namespace {

constexpr const char* kSyntax =
    "write DEVICE[:threads=N][:conv=auto|reference|im2col|cudnn][:math=fp32|tf32|bf16][:gemm=cublas|naive|tiled|registers]"
    "[:reduce=auto|uncoalesced|coalesced|tree|shuffle][:precision=fp32|bf16] with DEVICE cpu, cuda or cuda:N, "
    "e.g. cpu:threads=1,cpu:threads=2";

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, sep)) out.push_back(item);
  if (!text.empty() && text.back() == sep) out.emplace_back();
  return out;
}

bool all_digits(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}

RunVariant parse_one(const std::string& item, int default_threads, ConvImpl default_conv, GemmImpl default_gemm,
                     ReduceImpl default_reduce) {
  RunVariant v;
  v.label = item;
  v.threads = default_threads;
  v.conv = default_conv;
  v.gemm = default_gemm;
  v.reduce = default_reduce;
  std::vector<std::string> parts = split(item, ':');
  NNLAB_CHECK(!parts.empty() && (parts[0] == "cpu" || parts[0] == "cuda"), "unknown device '", item, "'; ", kSyntax);
  v.device_text = parts[0];
  size_t i = 1;
  if (parts[0] == "cuda" && parts.size() > 1 && all_digits(parts[1])) v.device_text += ":" + parts[i++];
  if (parts[0] == "cuda" && cuda_simulated()) v.label += kSimulatedMark;  // its times are CPU times
  for (; i < parts.size(); ++i) {
    const size_t eq = parts[i].find('=');
    NNLAB_CHECK(eq != std::string::npos, "device '", item, "': setting '", parts[i], "' is not KEY=VALUE; ", kSyntax);
    const std::string key = parts[i].substr(0, eq), value = parts[i].substr(eq + 1);
    if (key == "threads") {
      NNLAB_CHECK(all_digits(value) && value.size() < 6, "device '", item, "': threads must be a count, got '", value,
                  "'");
      v.threads = std::stoi(value);
    } else if (key == "conv") {
      v.conv = parse_conv_impl(value);
    } else if (key == "gemm") {
      v.gemm = parse_gemm_impl(value);
    } else if (key == "reduce") {
      v.reduce = parse_reduce_impl(value);
    } else if (key == "math") {
      v.math = parse_cuda_math(value, "device '" + item + "': math");
    } else if (key == "precision") {
      NNLAB_CHECK(value != "tf32", "device '", item, "': precision=tf32 is the math mode of float32 tensors: write ",
                  parts[0], ":math=tf32");
      NNLAB_CHECK(value == "fp32" || value == "bf16", "device '", item, "': precision must be fp32 or bf16, got '",
                  value, "'");
      v.precision = value;
    } else {
      fail("device '", item, "': unknown setting '", key, "'; ", kSyntax);
    }
  }
  return v;
}

}  // namespace

std::vector<RunVariant> parse_variants(const std::string& list, int default_threads, ConvImpl default_conv,
                                       GemmImpl default_gemm, ReduceImpl default_reduce) {
  std::vector<RunVariant> out;
  for (const std::string& item : split(list, ','))
    out.push_back(parse_one(item, default_threads, default_conv, default_gemm, default_reduce));
  NNLAB_CHECK(!out.empty(), "no device given; ", kSyntax);
  return out;
}

void check_variants(const std::vector<RunVariant>& variants) {
  for (const RunVariant& v : variants) {
    if (v.device_text.rfind("cuda", 0) == 0 && !cuda_status().usable)
      fail("device '", v.label, "': CUDA is not usable here: ", cuda_status().reason,
           ". Run on a machine with an NVIDIA GPU, or compare CPU variants (e.g. cpu:threads=1,cpu:threads=2)");
    const Device device = resolve_device(v.device_text, nullptr);  // a missing cuda:N index fails here
    check_conv_impl(v.conv, device);
    check_gemm_impl(v.gemm, device);
    check_reduce_impl(v.reduce, device);
    NNLAB_CHECK(v.math != CudaMath::Tf32 || device.kind == DeviceKind::CUDA, "device '", v.label,
                "': math=tf32 is a format of NVIDIA's tensor cores; the CPU computes in fp32, or bf16 products");
    NNLAB_CHECK(v.math != CudaMath::Bf16 || device.kind == DeviceKind::CUDA || host_cpu::bf16_available(), "device '",
                v.label, "': math=bf16 cannot run on this CPU: ", host_cpu::bf16_unavailable_reason());
  }
}

Device apply_variant(const RunVariant& v) {
  check_variants({v});
  const Device device = resolve_device(v.device_text, nullptr);
  host_cpu::set_threads(v.threads);
  set_conv_impl(v.conv);
  set_gemm_impl(v.gemm);
  set_reduce_impl(v.reduce);
  host_cpu::set_bf16_products(device.is_cpu() && v.math == CudaMath::Bf16);
  CudaOptions cuda = cuda_options();
  cuda.math = device.is_cpu() ? CudaMath::Fp32 : v.math;
  set_cuda_options(cuda);
  return device;
}

}  // namespace nnlab
