// The shape of a decoder-only transformer, enough to count its weights, KV cache and FLOPs.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace gpumux {

struct ModelShape {
  std::string name;
  std::vector<std::string> aliases;
  int layers = 0;
  int hidden = 0;
  int heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
  int intermediate = 0;
  int vocab = 0;
  bool tied_embeddings = false;
  bool qkv_bias = false;
  std::optional<int> sliding_window;  // KV cache holds at most this many tokens
  std::string source;                 // "file:line"

  // Parameter count: attention (q, k, v, o [+ qkv bias]), SwiGLU MLP (3 matrices), two norms per
  // layer, the embedding, the LM head unless tied, and the final norm.
  double Params() const;
  // Weights read from memory for every decode step: all of them except the input embedding table,
  // of which only one row per token is gathered (when tied, the LM head reads that table in full).
  double StreamedParams() const;
  // Parameters that take part in matrix multiplies (everything but the embedding gather and norms).
  double MatmulParams() const;
  // K and V elements stored per token of context, over all layers.
  double KvElementsPerToken() const { return 2.0 * layers * kv_heads * head_dim; }
};

}  // namespace gpumux
