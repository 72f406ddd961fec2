// A kafkajs consumer in a group (consumer.run): prints each record as
// "partition offset value" and stops after `count` distinct records,
// committing as it goes (autoCommit). A rebalance may hand it again a
// record whose commit had not gone out (at-least-once): it is printed
// again but not counted. Used by tests/integration/test_kafka_groups.py.
// usage: node consume.js BROKERS GROUP TOPIC COUNT
const { Kafka, logLevel } = require('kafkajs');

const [brokers, group, topic, count] = process.argv.slice(2);
const kafka = new Kafka({ clientId: 'keel-kafkajs', brokers: brokers.split(','),
                          logLevel: logLevel.WARN });
const consumer = kafka.consumer({ groupId: group, sessionTimeout: 10000,
                                  heartbeatInterval: 500 });
const seen = new Set();

async function main() {
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  await new Promise((resolve, reject) => {
    consumer.run({
      autoCommitThreshold: 1,
      eachMessage: async ({ partition, message }) => {
        console.log(`${partition} ${message.offset} ${message.value.toString()}`);
        seen.add(`${partition}/${message.offset}`);
        if (seen.size >= Number(count)) {
          setTimeout(resolve, 500); // let the last commit go out
        }
      },
    }).catch(reject);
  });
  await consumer.disconnect();
}

const timer = setTimeout(() => { console.error('timed out'); process.exit(2); }, 90000);
main().then(() => { clearTimeout(timer); process.exit(0); },
            (e) => { console.error(e); process.exit(1); });
