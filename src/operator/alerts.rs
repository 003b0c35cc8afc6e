//! The alerts orch raised, each with its delivery state per sink: `orch alerts` and the
//! board's `/api/alerts`.

use super::Error;
use super::view::workers::{AlertEntry, AlertsView, DeliveryView};
use crate::app::Loaded;
use crate::store::workers as ws;
use crate::store::{fmt_ms, now_ms};
use std::time::Duration;

/// `orch alerts --json` for the alerts newer than `since` (the board serves the same), each
/// with its delivery state per sink.
pub fn alerts_view(l: &Loaded, since: Duration) -> Result<AlertsView, Error> {
    let from = now_ms() - since.as_millis() as i64;
    let Some(mut store) = l.existing_store()? else {
        return Ok(AlertsView { alerts: Vec::new() });
    };
    let (alerts, deliveries) = store.read(|tx| {
        let alerts = ws::alerts(tx, from)?;
        let first = alerts.first().map_or(i64::MAX, |a| a.id);
        Ok((alerts, crate::store::alerts::deliveries(tx, first)?))
    })?;
    Ok(AlertsView {
        alerts: alerts
            .iter()
            .map(|a| AlertEntry {
                alert: a.into(),
                deliveries: deliveries
                    .iter()
                    .filter(|d| d.alert_id == a.id)
                    .map(|d| DeliveryView {
                        sink: d.sink.clone(),
                        state: d.state.clone(),
                        attempts: d.attempts,
                        last_error: d.last_error.clone(),
                        next_attempt_at: (d.state == "pending").then(|| fmt_ms(d.next_ms)),
                        done_at: d.done_ms.map(fmt_ms),
                    })
                    .collect(),
            })
            .collect(),
    })
}
