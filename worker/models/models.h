// models/models.h: the models this build has, one line each. A model is a
// folder, models/<name>/ (its sources: CMake compiles every .c there), and
// its line in MODELS: X(enum constant, model.type value, its struct
// model_ops table). model.type's allowed values, the enum the config holds
// and model.c's registry all come from this list; MODEL_TYPE_DOC is the
// key's documentation (configs/reference.ini and docs/CONFIG.md are
// generated from it: scripts/gen_config_doc.sh).
#ifndef VGPU_MODELS_H
#define VGPU_MODELS_H

#define MODELS(X)                                                                          \
    X(MODEL_MLP, "mlp", model_mlp) /* models/mlp/ */                                       \
    X(MODEL_GPT, "gpt", model_gpt) /* models/gpt/ */

#define MODEL_TYPE_DOC                                                                     \
    "the model: mlp = Linear -> ReLU ... -> Linear with softmax cross-entropy; gpt = a "   \
    "byte-level GPT-2-style transformer (data.dataset = text)"

#endif
