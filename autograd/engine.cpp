#include "autograd/engine.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "autograd/grad_mode.h"
#include "devices/registry.h"

namespace nnlab {

namespace {
thread_local bool g_grad_enabled = true;
NodeHook g_hook;
ForwardHook g_forward_hook;

// Reverse-postorder of the nodes reachable from root (iterative DFS: deep graphs must not
// overflow the stack). Every node comes before the nodes that produced its inputs.
std::vector<Node*> topological_order(Node* root) {
  std::vector<Node*> post;
  std::unordered_set<Node*> seen{root};
  std::vector<std::pair<Node*, size_t>> stack{{root, 0}};
  while (!stack.empty()) {
    auto& [node, next] = stack.back();
    if (next < node->inputs().size()) {
      const Tensor& input = node->inputs()[next++];
      Node* child = input.defined() ? input.grad_fn().get() : nullptr;
      if (child && seen.insert(child).second) stack.emplace_back(child, 0);
    } else {
      post.push_back(node);
      stack.pop_back();
    }
  }
  return {post.rbegin(), post.rend()};
}

// grad ← grad + g, written into a fresh buffer: g may alias another gradient (an add passes
// dy to both inputs), so neither is changed in place. One pass (read both, write the sum):
// a copy and then an axpby read and wrote the sum's bytes twice (0.4 ms a step for the
// 4 MB gradient where resnet8's two branches meet, on 2 cores). The same bits: g + grad.
Tensor sum_grads(const Tensor& grad, const Tensor& g) {
  Tensor out = Tensor::empty(grad.shape(), grad.dtype(), grad.device());
  backend_for(out.device()).binary_forward(BinaryOp::Add, g, grad, out);
  return out;
}

void accumulate_into_leaf(const Tensor& leaf, Tensor g) {
  NNLAB_CHECK(g.shape() == leaf.shape(), "backward: gradient ", g.describe(), " does not match its leaf ",
              leaf.describe());
  Tensor grad = leaf.grad();
  if (!grad.defined()) {
    // A gradient nobody else holds (no other handle, no view of its storage) becomes .grad
    // as it is; one that may alias another tensor (a pass-through dy) is copied first.
    const bool sole_owner = g.impl_ptr().use_count() == 1 && g.storage_use_count() == 1;
    const_cast<Tensor&>(leaf).set_grad(sole_owner ? g : g.clone());
  } else {
    backend_for(grad.device()).axpby(1.0, g, 1.0, grad);  // the engine alone accumulates into .grad
  }
}
// The casts into leaves that waited for the end of the walk, in the order the walk met them:
// one Backend::cast_all per device, then each node's gradient reported and given to its leaf
// as if its own backward had made it.
struct LeafCast {
  Node* node;
  Tensor dy;
};

void run_leaf_casts(std::vector<LeafCast>& casts) {
  std::vector<Device> devices;
  for (const LeafCast& c : casts)
    if (std::find(devices.begin(), devices.end(), c.dy.device()) == devices.end()) devices.push_back(c.dy.device());
  std::vector<Tensor> grads(casts.size());
  for (const Device& device : devices) {
    std::vector<Tensor> src, dst;
    std::vector<size_t> which;
    for (size_t i = 0; i < casts.size(); ++i) {
      if (casts[i].dy.device() != device) continue;
      const Tensor& leaf = casts[i].node->inputs()[0];
      src.push_back(casts[i].dy);
      dst.push_back(Tensor::empty(leaf.shape(), leaf.dtype(), device));
      which.push_back(i);
    }
    backend_for(device).cast_all(src, dst);
    for (size_t j = 0; j < which.size(); ++j) grads[which[j]] = std::move(dst[j]);
  }
  for (size_t i = 0; i < casts.size(); ++i) {
    std::vector<Tensor> node_grads;
    node_grads.push_back(std::move(grads[i]));  // held nowhere else: the leaf may keep it as .grad
    casts[i].dy = Tensor();
    if (g_hook) g_hook(*casts[i].node, node_grads);
    accumulate_into_leaf(casts[i].node->inputs()[0], std::move(node_grads[0]));
  }
}
}  // namespace

bool GradMode::enabled() { return g_grad_enabled; }
void GradMode::set_enabled(bool on) { g_grad_enabled = on; }

void set_backward_hook(NodeHook hook) { g_hook = std::move(hook); }
bool is_leaf_cast(const Node& node) { return node.only_casts() && node.needs_grad(0) && node.inputs()[0].is_leaf(); }
void set_forward_hook(ForwardHook hook) { g_forward_hook = std::move(hook); }

bool needs_graph(std::initializer_list<const Tensor*> inputs) {
  if (!GradMode::enabled()) return false;
  for (const Tensor* t : inputs)
    if (t && t->defined() && t->requires_grad()) return true;
  return false;
}

Tensor attach(Tensor out, std::shared_ptr<Node> node) {
  if (g_forward_hook) g_forward_hook(*node, out);
  out.set_grad_fn(std::move(node));
  return out;
}

void run_backward(const Tensor& root, const Tensor& seed_in) {
  NNLAB_CHECK(root.requires_grad(), "backward: the tensor ", root.describe(),
              " does not require a gradient (no input of the ops that made it requires one)");
  Tensor seed = seed_in;
  if (!seed.defined()) {
    NNLAB_CHECK(root.numel() == 1, "backward: ", root.describe(),
                " is not a scalar; pass the gradient of the output (a seed of the same shape) to backward(seed)");
    seed = Tensor::full(root.shape(), 1.0, root.dtype(), root.device());
  }
  NNLAB_CHECK(seed.shape() == root.shape() && seed.dtype() == root.dtype(), "backward: seed ", seed.describe(),
              " does not match ", root.describe());
  if (root.is_leaf()) {
    accumulate_into_leaf(root, seed);
    return;
  }
  Node* root_node = root.grad_fn().get();
  NNLAB_CHECK(!root_node->released(), "backward: the graph behind ", root.describe(),
              " was already used by an earlier backward and freed; run the forward pass again");
  const std::vector<Node*> order = topological_order(root_node);
  std::unordered_map<Node*, Tensor> pending{{root_node, seed}};
  std::vector<LeafCast> leaf_casts;
  for (Node* node : order) {
    auto it = pending.find(node);
    if (it == pending.end()) continue;  // no gradient flows here
    const Tensor dy = std::move(it->second);
    pending.erase(it);
    if (is_leaf_cast(*node)) {
      leaf_casts.push_back({node, dy});
      continue;
    }
    std::vector<Tensor> grads = node->backward(dy);
    if (g_hook) g_hook(*node, grads);
    for (size_t i = 0; i < node->inputs().size(); ++i) {
      const Tensor& input = node->inputs()[i];
      if (i >= grads.size() || !grads[i].defined() || !input.defined() || !input.requires_grad()) continue;
      if (Node* producer = input.grad_fn().get()) {
        auto [slot, fresh] = pending.try_emplace(producer, grads[i]);
        if (!fresh) slot->second = sum_grads(slot->second, grads[i]);
      } else {
        accumulate_into_leaf(input, std::move(grads[i]));
      }
    }
  }
  run_leaf_casts(leaf_casts);
  // Releasing a node drops its inputs, which may hold the last reference to a producer
  // later in `order`; keep them all alive until every node has been released.
  std::vector<std::shared_ptr<Node>> keep_alive;
  for (Node* node : order)
    for (const Tensor& input : node->inputs())
      if (input.defined() && input.grad_fn()) keep_alive.push_back(input.grad_fn());
  for (Node* node : order) node->release();
}

// Tensor's own entry points (core/tensor.h declares them; core does not see the engine).
void Tensor::backward() const { run_backward(*this, Tensor()); }
void Tensor::backward(const Tensor& seed) const { run_backward(*this, seed); }

}  // namespace nnlab
