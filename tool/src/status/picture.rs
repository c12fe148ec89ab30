//! A status as a picture (`status --out DIR` writes `<name>.svg`): each master's
//! `used_memory` and its keys' bytes (sampled), against its even share of the memory and its
//! `maxmemory`; and the slots' owners.

use super::Status;
use crate::picture::{Column, Picture, Strip};

/// The picture of status `s`.
pub fn picture(s: &Status) -> Picture {
    let used: Vec<f64> = s
        .masters
        .iter()
        .filter(|m| m.unread.is_empty())
        .map(|m| m.used_memory)
        .collect();
    let mean = used.iter().sum::<f64>() / used.len().max(1) as f64;
    Picture {
        title: format!("Cluster status ({}, seed {})", s.server, s.seed),
        measure: "used_memory, and the keys' bytes (sampled)".into(),
        series: vec!["used_memory".into(), "keys' bytes (sampled)".into()],
        columns: s
            .masters
            .iter()
            .map(|m| Column {
                address: m.address.clone(),
                values: if m.unread.is_empty() {
                    vec![Some(m.used_memory), Some(m.bytes.value)]
                } else {
                    vec![None, None]
                },
                share: (mean > 0.0).then_some(mean),
                maxmemory: m.maxmemory,
            })
            .collect(),
        strips: vec![Strip {
            label: "owners now".into(),
            owners: s.owners.clone(),
        }],
    }
}
