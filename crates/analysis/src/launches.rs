//! How the host fed the GPU in each stage: launch calls per decode step, CUDA graph launches
//! per step, kernels per graph, and the share of GPU time inside graphs. A graph launch is one
//! host call however many kernels it ran, so these, not kernel counts, say whether a stage is
//! launch-bound.

use llmprof_bundle::{Bundle, GraphTrace, LaunchFacts, Stage, StageRole};

/// The launch facts of one stage; `None` when it launched nothing.
pub fn facts(bundle: &Bundle, stage: &Stage, role: StageRole) -> Option<LaunchFacts> {
    if stage.launches == 0 {
        return None;
    }
    // Graphs traced whole hide their kernels: kernel counts would leave them out.
    let kernels_known = bundle.totals.graph_trace != Some(GraphTrace::Graph);
    let steps = (role == StageRole::Decode)
        .then(|| decode_steps(bundle, stage))
        .flatten()
        .filter(|&n| n > 0);
    let per_step = |n: u64| steps.map(|s| n as f64 / s as f64);
    let ratio = |a: u64, b: u64| (b > 0).then(|| a as f64 / b as f64);
    let graphs = stage.graph_launches > 0;
    Some(LaunchFacts {
        steps,
        launches_per_step: per_step(stage.launches),
        kernels_per_step: per_step(stage.kernels).filter(|_| kernels_known),
        graph_launches_per_step: per_step(stage.graph_launches),
        kernels_per_graph: ratio(stage.graph_kernels, stage.graph_launches)
            .filter(|_| kernels_known && stage.graph_kernels > 0),
        graph_share_pct: ratio(stage.graph_busy_ns, stage.gpu_busy_ns)
            .filter(|_| graphs)
            .map(|r| r * 100.0),
        gpu_ns_per_launch: ratio(stage.gpu_busy_ns, stage.launches),
        launch_call_ns: ratio(stage.launch_api_ns, stage.launches),
    })
}

/// Decode steps over all of the stage's instances, from the workload.
pub fn decode_steps(bundle: &Bundle, stage: &Stage) -> Option<u64> {
    let w = bundle.workload.as_ref()?;
    (0..stage.instance_list.len())
        .map(|i| w.steps_of_instance(i))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use llmprof_bundle::{Distribution, StageKind};

    fn decode(launches: u64, kernels: u64, graph_launches: u64, graph_kernels: u64) -> Stage {
        Stage {
            id: 0,
            domain: String::new(),
            name: "decode".into(),
            kind: StageKind::PushPop,
            parent: None,
            parents: Vec::new(),
            depth: 0,
            instances: 1,
            wall_ns: 100_000,
            wall: Distribution::default(),
            gpu_proj_ns: 90_000,
            gpu_ops: launches,
            kernel_ns: 80_000,
            kernels,
            launches,
            launch_api_ns: launches * 5_000,
            gpu_busy_ns: 80_000,
            gpu_busy_pct: 80.0,
            graph_launches,
            graph_kernels,
            graph_busy_ns: 60_000,
            instance_list: Vec::new(),
        }
    }

    #[test]
    fn graph_launches_count_once_per_step() {
        // 4 steps, each one graph launch of 40 kernels plus 2 eager kernels (node level).
        let b = Bundle::new("x");
        let f = facts(&b, &decode(12, 168, 4, 160), StageRole::Decode).unwrap();
        assert_eq!(f.steps, None, "no workload: no per-step figures");
        assert_eq!(f.kernels_per_graph, Some(40.0));
        assert_eq!(f.graph_share_pct, Some(75.0));
        assert_eq!(f.gpu_ns_per_launch, Some(80_000.0 / 12.0));
        assert_eq!(f.launch_call_ns, Some(5_000.0));
        let mut b = Bundle::new("x");
        b.totals.graph_trace = Some(GraphTrace::Graph);
        let f = facts(&b, &decode(12, 8, 4, 0), StageRole::Decode).unwrap();
        assert_eq!(
            f.kernels_per_graph, None,
            "graph level: kernels inside graphs unknown"
        );
        assert!(facts(&b, &decode(0, 0, 0, 0), StageRole::Decode).is_none());
    }
}
