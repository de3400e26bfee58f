// memscale/json/image_fields.hpp: a multimodal training record's images (train.images_per_sample,
// train.image, train.min_pixels, train.max_pixels), read into training_spec::images.
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "memscale/json/fields.hpp"
#include "memscale/json/vision_records.hpp"
#include "memscale/training.hpp"

namespace memscale::json_io {

// train.image is read as the vision records read it (N or "HxW" pixels, before the processor's
// resize); absent pixel bounds are the model's image processor's (vision_tower.hpp).
inline void read_images(const json& t, training_spec& run) {
  const std::string path = "train";
  constexpr auto bad = error_code::invalid_run;
  run.images.per_sample = get_count(t, "images_per_sample", path, 0, bad);
  if (run.images.per_sample == 0) {
    for (const char* key : {"min_pixels", "max_pixels"})
      if (t.contains(key)) bad_field(bad, path + "." + key, t.at(key), "needs train.images_per_sample > 0");
    return;
  }
  if (!t.contains("image") || t.at("image").is_null())
    bad_field(bad, path + ".image", json(), "is required with train.images_per_sample > 0: N or \"HxW\" pixels");
  vision::vision_spec size{};
  read_image_size(t, size);
  run.images.height = size.image_height;
  run.images.width = size.image_width;
  run.images.min_pixels = get_count(t, "min_pixels", path, run.images.min_pixels, bad);
  run.images.max_pixels = get_count(t, "max_pixels", path, run.images.max_pixels, bad);
  for (const char* key : {"min_pixels", "max_pixels"})  // 0 stands for the processor's own bound
    if (t.contains(key) && t.at(key) == 0) bad_field(bad, path + "." + key, t.at(key), "must be > 0 pixels");
}

}  // namespace memscale::json_io
