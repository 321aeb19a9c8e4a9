//! TEMPORARY stub of the charts API (replaced on merge).
#![allow(unused_variables)]
use llmprof_bundle::{Bundle, Category};
pub fn stage_breakdown(bundle: &Bundle) -> Option<String> {
    None
}
pub fn category_share(bundle: &Bundle) -> Option<String> {
    None
}
pub fn top_kernels(bundle: &Bundle, n: usize) -> Option<String> {
    None
}
pub fn speed_of_light(bundle: &Bundle) -> Option<String> {
    None
}
pub fn compare_stages(bundles: &[&Bundle]) -> Option<String> {
    None
}
pub fn compare_category_mix(bundles: &[&Bundle]) -> Option<String> {
    None
}
pub fn category_color(c: Category) -> &'static str {
    "#888888"
}
