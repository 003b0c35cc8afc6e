//! The hosts sharing this organisation's store, with their heartbeats: `orch nodes` and the
//! board's `/api/nodes`.

use super::Error;
use super::view::nodes::NodesView;

/// The nodes sharing the store and their heartbeats, on the database's clock: what `orch
/// nodes` prints and the board's `/api/nodes` answers. No store yet: no node.
pub fn nodes_view(l: &crate::app::Loaded) -> Result<NodesView, Error> {
    let this = crate::node::name();
    let total = l.config.worker.max_parallel_total;
    Ok(match l.existing_store()? {
        Some(mut store) => {
            let (rows, now, running) = store.read(|tx| {
                Ok((
                    crate::store::nodes::list(tx)?,
                    tx.clock_ms()?,
                    crate::store::nodes::lock_holders_all(tx)?,
                ))
            })?;
            NodesView::of(this, &rows, now, running, total)
        }
        None => NodesView::of(this, &[], crate::store::now_ms(), 0, total),
    })
}
