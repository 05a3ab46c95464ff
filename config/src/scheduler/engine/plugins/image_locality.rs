//! ImageLocality: favours nodes that already have the pod's images, by size and spread.

// ImageLocality: favours nodes that already have the pod's images, weighted by image size and by how widely the image
// is spread (an image on every node says little about this one). Image volumes count from v1.36 (`ImageVolumes`).

use super::{Cycle, NodeScorer, PreScore, PreScorePlugin};
use crate::scheduler::engine::behaviour::{Behaviour, ImageVolumes};
use crate::scheduler::engine::snapshot::{NodeInfo, Snapshot};

const MB: i64 = 1024 * 1024;
/// Below this sum the score is 0.
const MIN_THRESHOLD: i64 = 23 * MB;
/// Per container, above this sum the score is 100.
const MAX_CONTAINER_THRESHOLD: i64 = 1000 * MB;

/// The plugin.
#[derive(Debug)]
pub struct ImageLocality {
    image_volumes: ImageVolumes,
}

impl ImageLocality {
    /// The plugin as `behaviour`'s kube-scheduler scores.
    pub fn new(behaviour: Behaviour) -> ImageLocality {
        ImageLocality {
            image_volumes: behaviour.image_volumes(),
        }
    }
}

struct Score<'a> {
    snapshot: &'a Snapshot,
    /// The images whose presence scores: containers', then image volumes' when counted.
    images: Vec<String>,
    /// How many images the threshold is scaled by (`imageCount`).
    count: usize,
}

impl PreScorePlugin for ImageLocality {
    fn pre_score<'a>(&'a self, cycle: &Cycle<'a>, _nodes: &[&'a NodeInfo]) -> PreScore<'a> {
        let spec = cycle.pod.pod().spec.as_ref();
        let mut images: Vec<String> = spec
            .into_iter()
            .flat_map(|s| s.init_containers.iter().flatten().chain(s.containers.iter()))
            .map(|c| normalized_image_name(c.image.as_deref().unwrap_or_default()))
            .collect();
        let containers = images.len();
        if self.image_volumes != ImageVolumes::Ignored {
            let volumes = spec.into_iter().flat_map(|s| s.volumes.iter().flatten());
            images.extend(
                volumes
                    .filter_map(|v| v.image.as_ref())
                    .map(|image| normalized_image_name(image.reference.as_deref().unwrap_or_default())),
            );
        }
        let count = match self.image_volumes {
            ImageVolumes::InSumAndCount => images.len(),
            ImageVolumes::Ignored | ImageVolumes::InSum => containers,
        };
        PreScore::Run(Box::new(Score {
            snapshot: cycle.snapshot,
            images,
            count,
        }))
    }
}

impl NodeScorer for Score<'_> {
    fn score(&self, node: &NodeInfo) -> i64 {
        let total_nodes = self.snapshot.num_nodes();
        let sum: i64 = self
            .images
            .iter()
            .filter(|image| node.has_image(image))
            .filter_map(|image| self.snapshot.image(image))
            .map(|summary| {
                let spread = summary.nodes as f64 / total_nodes as f64;
                (summary.size as f64 * spread) as i64
            })
            .sum();
        let max_threshold = MAX_CONTAINER_THRESHOLD * self.count as i64;
        let clamped = if sum < MIN_THRESHOLD {
            MIN_THRESHOLD
        } else {
            sum.min(max_threshold)
        };
        100 * (clamped - MIN_THRESHOLD) / (max_threshold - MIN_THRESHOLD)
    }
}

/// Adds `:latest` to image names without a tag (a `:` after the last `/`).
pub(crate) fn normalized_image_name(name: &str) -> String {
    let last_colon = name.rfind(':').map_or(-1, |i| i as i64);
    let last_slash = name.rfind('/').map_or(-1, |i| i as i64);
    if last_colon <= last_slash {
        format!("{name}:latest")
    } else {
        name.to_string()
    }
}
