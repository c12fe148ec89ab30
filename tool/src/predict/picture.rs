//! A prediction as a picture (`predict --out DIR` writes `<name>.svg`): each master's
//! `used_memory` now, when redis-cli's plan is done and when the plan by weight is (with
//! `--by`), against its share of the memory and its `maxmemory`; and the slots' owners now and
//! after each plan, the moved slots marked.

use super::method::{MemoryRow, MethodCost};
use super::Prediction;
use crate::picture::{Column, Picture, Strip};

/// The memory rows of the method the prediction is for, among `methods`.
fn rows<'a>(methods: &'a [MethodCost], p: &Prediction) -> &'a [MemoryRow] {
    methods
        .iter()
        .find(|m| m.method == p.method)
        .or_else(|| methods.first())
        .map_or(&[], |m| m.memory.as_slice())
}

/// The picture of prediction `p`.
pub fn picture(p: &Prediction) -> Picture {
    let redis_cli = rows(&p.methods, p);
    let by_weight = p.by_weight.as_ref();
    let weighted = by_weight.map_or(&[][..], |w| rows(&w.methods, p));
    let value = |rows: &[MemoryRow], address: &str, end: bool| {
        rows.iter()
            .find(|r| r.address == address)
            .map(|r| if end { r.end } else { r.now })
    };
    // Each master's share of the memory when done: even among the masters that keep slots,
    // or by the plan by weight's capacities.
    let total: f64 = redis_cli.iter().map(|r| r.end).sum();
    let staying: Vec<&str> = p
        .masters
        .iter()
        .filter(|m| m.slots_after > 0)
        .map(|m| m.address.as_str())
        .collect();
    let share = |address: &str| -> Option<f64> {
        if total <= 0.0 {
            return None;
        }
        if let Some(w) = by_weight {
            let sum: f64 = w.capacities.iter().sum();
            let i = w.masters.iter().position(|m| m == address)?;
            return (sum > 0.0).then(|| total * w.capacities.get(i).copied().unwrap_or(0.0) / sum);
        }
        staying
            .contains(&address)
            .then(|| total / staying.len().max(1) as f64)
    };
    let maxmemory = |address: &str| {
        p.capacity.as_ref().map_or(0.0, |c| {
            c.walks
                .first()
                .and_then(|w| w.walk.node(address))
                .map_or(0.0, |n| n.maxmemory)
        })
    };
    let columns = p
        .masters
        .iter()
        .map(|m| {
            let mut values = vec![
                value(redis_cli, &m.address, false),
                value(redis_cli, &m.address, true),
            ];
            if by_weight.is_some() {
                values.push(value(weighted, &m.address, true));
            }
            Column {
                address: m.address.clone(),
                values,
                share: share(&m.address),
                maxmemory: maxmemory(&m.address),
            }
        })
        .collect();
    let mut series = vec!["now".to_string(), "after redis-cli's plan".to_string()];
    let mut strips = vec![
        Strip {
            label: "now".into(),
            owners: p.owner_before.clone(),
        },
        Strip {
            label: "after redis-cli's plan".into(),
            owners: p.owner_after.clone(),
        },
    ];
    if let Some(w) = by_weight {
        let name = format!("after the plan by {}", w.plan.by.name());
        let mut owners = p.owner_before.clone();
        for m in &w.plan.moves {
            if let Some(o) = owners.get_mut(usize::from(m.slot)) {
                *o = Some(m.to.clone());
            }
        }
        series.push(name.clone());
        strips.push(Strip {
            label: name,
            owners,
        });
    }
    Picture {
        title: format!("What the change does to the masters (seed {})", p.entry),
        measure: "used_memory".into(),
        series,
        columns,
        strips,
    }
}
