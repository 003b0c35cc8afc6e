//! `orch nodes`: the hosts sharing this organisation's store, with their heartbeats.

use super::{Ctx, Outcome};
use crate::operator::nodes::nodes_view;
use crate::operator::view::print_json;

pub fn nodes(ctx: &Ctx, json: bool) -> Outcome {
    let view = nodes_view(&ctx.load()?)?;
    if json {
        print_json(&view);
    } else {
        print!("{}", view.human());
    }
    Ok(0)
}
