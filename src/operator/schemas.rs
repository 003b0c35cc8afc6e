//! The JSON Schema of every published view — the commands' `--json` and the board's answers —
//! as docs/schema/<name>.json publishes it (a test keeps the files equal to the types). Kept
//! apart from `view/`: it lists the board's answers too, which are built on the views.

use super::view::{self, View};

/// Every published shape: (name, its JSON Schema), in README order.
pub fn schemas() -> Vec<(&'static str, serde_json::Value)> {
    fn one<V: View>() -> (&'static str, serde_json::Value) {
        let settings = schemars::generate::SchemaSettings::draft2020_12().for_serialize();
        let schema = settings.into_generator().into_root_schema_for::<V>();
        (V::NAME, schema.to_value())
    }
    vec![
        one::<view::config::CheckView>(),
        one::<view::config::GraphView>(),
        one::<view::locks::CanSpawnView>(),
        one::<view::locks::HoldView>(),
        one::<view::locks::UnholdView>(),
        one::<view::locks::FatalView>(),
        one::<view::workers::SpawnView>(),
        one::<view::workers::ReportView>(),
        one::<view::workers::StatusView>(),
        one::<view::workers::SessionsView>(),
        one::<view::workers::SessionView>(),
        one::<view::workers::LogLineView<'static>>(),
        one::<view::workers::CancelView>(),
        one::<view::workers::RespawnView>(),
        one::<view::workers::ApproveView>(),
        one::<view::workers::ReleaseView>(),
        one::<view::workers::ResumeView>(),
        one::<view::workers::GcView>(),
        one::<view::nodes::NodesView>(),
        one::<view::workers::AlertsView>(),
        one::<view::AlertLineView>(),
        one::<view::ci::CiStatusView>(),
        one::<view::ci::CiLogsView>(),
        one::<view::wave::PlanView>(),
        one::<view::wave::TickView>(),
        one::<view::wave::RunLineView>(),
        one::<view::wave::WaveStatusView>(),
        one::<view::wave::WaveCancelView>(),
        one::<view::wave::WaveRetryView>(),
        one::<view::setup::InitView>(),
        one::<view::setup::DemoView>(),
        one::<super::board::BoardView>(),
        one::<super::waves::WavesAnswer>(),
        one::<super::graph::GraphAnswer>(),
        one::<super::logs::LogAnswer>(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every object in every shape refuses fields it does not declare, and no shape has an
    /// epoch-millisecond field (times are RFC 3339, durations seconds).
    #[test]
    fn schemas_are_strict_and_have_no_millisecond_fields() {
        fn walk(name: &str, path: &str, v: &serde_json::Value, bad: &mut Vec<String>) {
            match v {
                serde_json::Value::Object(m) => {
                    if let Some(serde_json::Value::Object(props)) = m.get("properties") {
                        if m.get("additionalProperties") != Some(&serde_json::Value::Bool(false)) {
                            bad.push(format!("{name}: {path} allows unknown fields"));
                        }
                        for k in props.keys().filter(|k| k.ends_with("_ms")) {
                            bad.push(format!("{name}: {path}.{k} is in milliseconds"));
                        }
                    }
                    for (k, x) in m {
                        walk(name, &format!("{path}/{k}"), x, bad);
                    }
                }
                serde_json::Value::Array(a) => {
                    for (i, x) in a.iter().enumerate() {
                        walk(name, &format!("{path}/{i}"), x, bad);
                    }
                }
                _ => {}
            }
        }
        let mut bad = Vec::new();
        for (name, schema) in schemas() {
            walk(name, "", &schema, &mut bad);
        }
        assert!(bad.is_empty(), "{bad:#?}");
    }

    /// docs/schema/<name>.json is what the types generate; ORCH_UPDATE_SCHEMAS=1 rewrites them.
    #[test]
    fn published_schemas_match_the_types() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/schema");
        let update = std::env::var_os("ORCH_UPDATE_SCHEMAS").is_some();
        let mut stale = Vec::new();
        for (name, schema) in schemas() {
            let path = dir.join(format!("{name}.json"));
            let text = serde_json::to_string_pretty(&schema).unwrap() + "\n";
            if update {
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(&path, &text).unwrap();
            } else if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
                stale.push(path.display().to_string());
            }
        }
        assert!(
            stale.is_empty(),
            "schemas differ from the types (ORCH_UPDATE_SCHEMAS=1 cargo test --lib operator::schemas rewrites them): {stale:?}"
        );
    }
}
