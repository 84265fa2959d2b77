//! A broker's own produce and consume rates with the plain rskafka client, and a loader that
//! fills a topic from a file: the yardsticks of the Kafka throughput figures in
//! docs/connectors.md.
//!
//! ```sh
//! cargo run --release -p clasp-kafka --example broker_rate -- rate BROKER RECORDS BATCH
//! cargo run --release -p clasp-kafka --example broker_rate -- load BROKER TOPIC PARTITIONS FILE
//! ```
//!
//! `rate` creates a one-partition topic, produces RECORDS records of 60 bytes in batches of
//! BATCH (each acknowledged before the next), then reads them back with one consumer fetching
//! up to 4 MB at a time. `load` creates TOPIC with PARTITIONS partitions and produces FILE's
//! lines round the partitions, in batches of 2,000.

use rskafka::chrono::DateTime;
use rskafka::client::partition::{Compression, OffsetAt, PartitionClient, UnknownTopicHandling};
use rskafka::client::{Client, ClientBuilder};
use rskafka::record::Record;
use std::error::Error;
use std::time::Instant;

type Result<T> = std::result::Result<T, Box<dyn Error>>;

/// Records per produce request of `load`.
const LOAD_BATCH: usize = 2_000;
/// Largest batch `rate` accepts (its records are built in memory).
const MAX_BATCH: usize = 1 << 20;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["rate", broker, records, batch] => {
            let records = number("RECORDS", records, usize::MAX)?;
            let batch = number("BATCH", batch, MAX_BATCH)?.max(1);
            runtime.block_on(rate(broker, records, batch))
        }
        ["load", broker, topic, partitions, file] => {
            let partitions = i32::try_from(number("PARTITIONS", partitions, 1_000)?.max(1))?;
            let text = std::fs::read_to_string(file).map_err(|e| format!("reading {file}: {e}"))?;
            runtime.block_on(load(broker, topic, partitions, &text))
        }
        _ => {
            Err("usage: broker_rate rate BROKER RECORDS BATCH | load BROKER TOPIC PARTITIONS FILE"
                .into())
        }
    }
}

/// `text` as a count of at most `max`, or an error naming `what`.
fn number(what: &str, text: &str, max: usize) -> Result<usize> {
    match text.parse::<usize>() {
        Ok(n) if n <= max => Ok(n),
        Ok(n) => Err(format!("{what} = {n}: at most {max}").into()),
        Err(e) => Err(format!("{what} = {text:?}: {e}").into()),
    }
}

async fn connect(broker: &str) -> Result<Client> {
    Ok(ClientBuilder::new(vec![broker.to_owned()])
        .build()
        .await
        .map_err(|e| format!("connecting to {broker}: {e}"))?)
}

async fn create(client: &Client, topic: &str, partitions: i32) -> Result<()> {
    client
        .controller_client()?
        .create_topic(topic, partitions, 1, 5_000)
        .await
        .map_err(|e| format!("creating topic {topic}: {e}"))?;
    Ok(())
}

async fn partition(client: &Client, topic: &str, p: i32) -> Result<PartitionClient> {
    Ok(client.partition_client(topic, p, UnknownTopicHandling::Retry).await?)
}

fn record(key: Option<Vec<u8>>, value: Vec<u8>) -> Record {
    Record {
        key,
        value: Some(value),
        headers: Default::default(),
        timestamp: DateTime::from_timestamp_millis(1_700_000_000_000).unwrap_or_default(),
    }
}

async fn rate(broker: &str, records: usize, batch: usize) -> Result<()> {
    let client = connect(broker).await?;
    let topic = format!("broker-rate-{}", std::process::id());
    create(&client, &topic, 1).await?;
    let pc = partition(&client, &topic, 0).await?;
    let value = vec![b'x'; 60];
    let started = Instant::now();
    let mut sent = 0;
    while sent < records {
        let n = batch.min(records - sent);
        let batch = (sent..sent + n)
            .map(|i| record(Some(format!("k{i}").into_bytes()), value.clone()))
            .collect();
        pc.produce(batch, Compression::NoCompression).await?;
        sent += n;
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "produce {records} records of 60 B in batches of {batch}: {secs:.3} s, {:.0} records/s",
        records as f64 / secs
    );
    let started = Instant::now();
    let mut offset = pc.get_offset(OffsetAt::Earliest).await?;
    let (mut read, mut empty) = (0, 0);
    while read < records {
        let (fetched, _high_watermark) = pc.fetch_records(offset, 1..4_000_000, 500).await?;
        let Some(last) = fetched.last() else {
            empty += 1;
            if empty == 100 {
                return Err(format!("{topic}: nothing to read at offset {offset}").into());
            }
            continue;
        };
        (offset, empty) = (last.offset + 1, 0);
        read += fetched.len();
    }
    let secs = started.elapsed().as_secs_f64();
    println!("consume {read} records: {secs:.3} s, {:.0} records/s", read as f64 / secs);
    Ok(())
}

async fn load(broker: &str, topic: &str, partitions: i32, text: &str) -> Result<()> {
    let client = connect(broker).await?;
    create(&client, topic, partitions).await?;
    let lines: Vec<&str> = text.lines().collect();
    let started = Instant::now();
    for p in 0..partitions {
        let pc = partition(&client, topic, p).await?;
        let mine: Vec<&str> =
            lines.iter().skip(p as usize).step_by(partitions as usize).copied().collect();
        for chunk in mine.chunks(LOAD_BATCH) {
            let batch = chunk.iter().map(|l| record(None, l.as_bytes().to_vec())).collect();
            pc.produce(batch, Compression::NoCompression).await?;
        }
    }
    println!("loaded {} lines in {:.3} s", lines.len(), started.elapsed().as_secs_f64());
    Ok(())
}
