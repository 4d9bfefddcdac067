// The backward engine: a topological sort of the graph behind a tensor, then one reverse
// walk that calls each node's backward once, after all gradients of its output have been
// summed. Leaves that require a gradient receive it in .grad (accumulated with +=).
// A cast whose input is a leaf (a bf16 model's weight copy: layers/precision.h) waits until
// the walk is over; then all of them run as one Backend::cast_all (CUDA: one kernel for the
// model's weight gradients instead of one per weight). Nothing waits on them, as leaves have
// no producers, so only the moment changes: those leaves' gradients arrive last.
#pragma once
#include <functional>
#include <memory>

#include "autograd/node.h"
#include "core/tensor.h"

namespace nnlab {

// seed: the gradient of `root`; may be undefined only when root has one element (then 1).
void run_backward(const Tensor& root, const Tensor& seed);

// Called after each node's backward when set, before its gradients reach the leaves (used by
// --check-numerics, `explain` and the gradient all-reduce); the leaf casts that wait for the
// walk's end are reported one by one after their common call.
using NodeHook = std::function<void(const Node& node, const std::vector<Tensor>& input_grads)>;
void set_backward_hook(NodeHook hook);
// Is node one of the leaf casts that wait for the walk's end (a cast into a leaf needing a gradient)?
bool is_leaf_cast(const Node& node);

// Called by attach() with each node as the forward pass records it, and the op's output
// (used by `nnlab explain` to list the forward ops in order). Unset: one branch.
using ForwardHook = std::function<void(const Node& node, const Tensor& out)>;
void set_forward_hook(ForwardHook hook);

// Does the op with these inputs need a graph node? (grad mode on and some input requires grad)
bool needs_graph(std::initializer_list<const Tensor*> inputs);

// Attaches `node` as the grad_fn of `out` when needed; returns out.
Tensor attach(Tensor out, std::shared_ptr<Node> node);

}  // namespace nnlab
