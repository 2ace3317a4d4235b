#include "model/hf/hf_source.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/hf/hf_vocabulary.h"

namespace kvfleet::model {
namespace fs = std::filesystem;

HfSource::~HfSource() = default;

absl::StatusOr<std::unique_ptr<HfSource>> HfSource::OpenConfig(const std::string& config_json) {
  std::unique_ptr<HfSource> s(new HfSource());
  s->path_ = config_json;
  RETURN_IF_ERROR(s->ReadConfig(config_json));
  return s;
}

absl::StatusOr<std::unique_ptr<HfSource>> HfSource::Open(const std::string& dir) {
  std::unique_ptr<HfSource> s(new HfSource());
  s->path_ = dir;
  const fs::path config = fs::path(dir) / "config.json";
  if (!fs::exists(config)) {
    return absl::NotFoundError(absl::StrCat(dir, ": no config.json; a Hugging Face checkpoint directory holds "
                                                 "config.json, *.safetensors and tokenizer.json"));
  }
  RETURN_IF_ERROR(s->ReadConfig(config.string()));
  RETURN_IF_ERROR(s->OpenWeights());
  s->vocabulary_ = ReadHfVocabulary(dir);
  RETURN_IF_ERROR(s->ReadGenerationConfig());
  // The embedding table may have more rows than the tokenizer has tokens
  // (padded for the GPU): the rest are ids no text produces.
  if (s->vocabulary_.ok() && s->config_->Has("vocab_size")) {
    ASSIGN_OR_RETURN(int64_t rows, s->config_->Int("vocab_size"));
    Vocabulary& v = *s->vocabulary_;
    if (v.size() > rows) {
      return absl::InvalidArgumentError(absl::StrCat(dir, ": tokenizer.json has ", v.size(),
                                                     " tokens but config.json's vocab_size is ", rows));
    }
    while (v.size() < rows) {
      v.tokens.push_back(absl::StrCat("<|kvfleet_unused_", v.size(), "|>"));
      v.token_types.push_back(TokenType::kUnused);
      if (!v.scores.empty()) v.scores.push_back(-1e9f);
    }
    if (!v.eos.has_value() && !s->generation_defaults_.eos_token_ids.empty()) {
      v.eos = s->generation_defaults_.eos_token_ids.front();
    }
  }
  return s;
}

absl::Status HfSource::ReadConfig(const std::string& config_json) {
  ASSIGN_OR_RETURN(JsonConfigReader reader, JsonConfigReader::FromFile(config_json));
  config_ = std::make_unique<JsonConfigReader>(std::move(reader));
  if (!config_->Has("architectures")) {
    return config_->Invalid("'architectures' is missing; it names the model class (e.g. [\"Qwen2ForCausalLM\"])");
  }
  ASSIGN_OR_RETURN(std::vector<std::string> archs, config_->StringList("architectures"));
  if (archs.empty()) return config_->Invalid("'architectures' is empty");
  architecture_ = archs.front();
  const fs::path p = fs::path(config_json).parent_path();
  name_ = p.filename().empty() ? architecture_ : p.filename().string();
  return absl::OkStatus();
}

absl::Status HfSource::OpenWeights() {
  const fs::path dir(path_);
  const fs::path index = dir / "model.safetensors.index.json";
  if (fs::exists(index)) {
    ASSIGN_OR_RETURN(nlohmann::json j, ReadJsonFile(index.string()));
    if (!j.contains("weight_map") || !j["weight_map"].is_object()) {
      return absl::InvalidArgumentError(absl::StrCat(index.string(), ": 'weight_map' is missing"));
    }
    std::map<std::string, std::string> weight_map;
    for (const auto& [tensor, file] : j["weight_map"].items()) {
      if (!file.is_string()) return absl::InvalidArgumentError(absl::StrCat(index.string(), ": weight_map['", tensor, "'] is not a file name"));
      weight_map[tensor] = file.get<std::string>();
    }
    std::map<std::string, bool> files;
    for (const auto& [tensor, file] : weight_map) files[file] = true;
    for (const auto& [file, unused] : files) {
      if (file.find('/') != std::string::npos || file == "..") {
        return absl::InvalidArgumentError(absl::StrCat(index.string(), ": shard name '", file, "' is not a file in the directory"));
      }
      if (!fs::exists(dir / file)) {
        return absl::NotFoundError(absl::StrCat(index.string(), " names shard ", file,
                                                ", which is missing; download the whole checkpoint"));
      }
      RETURN_IF_ERROR(AddShard((dir / file).string(), &weight_map));
    }
    for (const auto& [tensor, file] : weight_map) {
      if (FindTensor(tensor) == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(index.string(), " places tensor '", tensor, "' in ", file,
                                                       ", which does not hold it"));
      }
    }
    return absl::OkStatus();
  }
  if (fs::exists(dir / "model.safetensors")) return AddShard((dir / "model.safetensors").string(), nullptr);
  return absl::NotFoundError(absl::StrCat(path_, ": no model.safetensors and no model.safetensors.index.json "
                                                 "(kvfleet reads safetensors weights, not .bin or .pt)"));
}

absl::Status HfSource::AddShard(const std::string& file, const std::map<std::string, std::string>* weight_map) {
  ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> shard, SafetensorsFile::Open(file));
  for (const TensorView& t : shard->tensors()) {
    if (tensor_index_.count(t.name) > 0) {
      return absl::InvalidArgumentError(absl::StrCat(file, ": tensor '", t.name, "' is also in another shard"));
    }
    tensor_index_.emplace(t.name, tensors_.size());
    tensors_.push_back(t);
  }
  shards_.push_back(std::move(shard));
  return absl::OkStatus();
}

absl::Status HfSource::ReadGenerationConfig() {
  const fs::path file = fs::path(path_) / "generation_config.json";
  if (!fs::exists(file)) return absl::OkStatus();
  ASSIGN_OR_RETURN(JsonConfigReader r, JsonConfigReader::FromFile(file.string()));
  GenerationDefaults& g = generation_defaults_;
  if (r.Has("eos_token_id")) {
    if (r.json()["eos_token_id"].is_array()) {
      ASSIGN_OR_RETURN(std::vector<int64_t> ids, r.IntList("eos_token_id"));
      for (int64_t id : ids) g.eos_token_ids.push_back(static_cast<TokenId>(id));
    } else {
      ASSIGN_OR_RETURN(int64_t id, r.Int("eos_token_id"));
      g.eos_token_ids.push_back(static_cast<TokenId>(id));
    }
  }
  if (r.Has("temperature")) {
    ASSIGN_OR_RETURN(g.temperature, r.Float("temperature"));
  }
  if (r.Has("top_p")) {
    ASSIGN_OR_RETURN(g.top_p, r.Float("top_p"));
  }
  if (r.Has("top_k")) {
    ASSIGN_OR_RETURN(g.top_k, r.Int("top_k"));
  }
  return absl::OkStatus();
}

const TensorView* HfSource::FindTensor(std::string_view name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

int64_t HfSource::mapped_bytes() const {
  int64_t bytes = 0;
  for (const auto& s : shards_) bytes += s->file_size();
  return bytes;
}

std::vector<std::string> HfSource::weight_files() const {
  std::vector<std::string> files;
  for (const auto& s : shards_) files.push_back(s->path());
  return files;
}

void HfSource::DropPages(const void* data, size_t size) const {
  for (const auto& s : shards_) s->DropPages(data, size);  // each ignores ranges outside its mapping
}

}  // namespace kvfleet::model
