// The names of the model kinds vit/model_kinds.h declares (timm's global_pool names, the head's kind), as
// `vit inspect`, configs and errors print them.
#include "vit/model_kinds.h"

namespace vit {

const char* pool_name(Pool p) { return p == Pool::Token ? "token" : p == Pool::Avg ? "avg" : "map"; }

const char* head_kind_name(HeadKind k) {
  return k == HeadKind::Classifier ? "classifier" : k == HeadKind::Projection ? "projection" : "none";
}

}  // namespace vit
