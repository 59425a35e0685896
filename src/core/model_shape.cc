#include "core/model_shape.h"

namespace gpumux {
namespace {

double PerLayerAttention(const ModelShape& m) {
  double q = double(m.heads) * m.head_dim;
  double kv = double(m.kv_heads) * m.head_dim;
  return m.hidden * q + 2 * m.hidden * kv + q * m.hidden + (m.qkv_bias ? q + 2 * kv : 0);
}

double PerLayerMlp(const ModelShape& m) { return 3.0 * m.hidden * m.intermediate; }

double Embedding(const ModelShape& m) { return double(m.vocab) * m.hidden; }

}  // namespace

double ModelShape::Params() const {
  double per_layer = PerLayerAttention(*this) + PerLayerMlp(*this) + 2.0 * hidden;
  return layers * per_layer + Embedding(*this) * (tied_embeddings ? 1 : 2) + hidden;
}

double ModelShape::StreamedParams() const {
  return tied_embeddings ? Params() : Params() - Embedding(*this);
}

double ModelShape::MatmulParams() const {
  return layers * (PerLayerAttention(*this) + PerLayerMlp(*this)) + Embedding(*this);  // + LM head
}

}  // namespace gpumux
