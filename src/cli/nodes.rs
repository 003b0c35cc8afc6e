//! `orch nodes`: the hosts sharing this organisation's store, with their heartbeats.

use super::view::nodes::NodesView;
use super::view::print_json;
use super::{Ctx, Outcome};

pub fn nodes(ctx: &Ctx, json: bool) -> Outcome {
    let l = ctx.load()?;
    let this = crate::node::name();
    let view = match l.existing_store()? {
        Some(mut store) => {
            let (rows, now) =
                store.read(|tx| Ok((crate::store::nodes::list(tx)?, tx.clock_ms()?)))?;
            NodesView::of(this, &rows, now)
        }
        None => NodesView::of(this, &[], crate::store::now_ms()),
    };
    if json {
        print_json(&view);
    } else {
        print!("{}", view.human());
    }
    Ok(0)
}
