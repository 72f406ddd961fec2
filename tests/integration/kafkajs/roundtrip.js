// kafkajs against keel brokers: create the topic with kafkajs's admin
// client (unless it exists), produce N keyed records to partition 0 with
// acks=all (-1) in requests of 10, check the offsets are dense and the high
// watermark kafkajs's admin lists matches. Prints
// "kafkajs ok produced=N first=O last=O"; the caller reads them back.
//
// --sasl=MECHANISM:USER:PASSWORD authenticates (SASL_PLAINTEXT listeners).
// --ssl-ca=FILE connects with TLS, verifying the brokers against FILE.
//
// With --follow it instead produces "kafkajs-before", prints
// "before ok offset=O", waits for a line on stdin (the test kills the
// partition's leader meanwhile), produces "kafkajs-after" with the same
// producer, which must find the new leader, and prints "after ok offset=O".
'use strict';
const fs = require('fs');
const { Kafka, logLevel, CompressionTypes } = require('kafkajs');

function fail(msg) {
  console.error('kafkajs: ' + msg);
  process.exit(1);
}

async function main() {
  const args = Object.fromEntries(process.argv.slice(2).map((a) => a.replace(/^--/, '').split('=')));
  const brokers = (args.brokers || '127.0.0.1:9092').split(',');
  const topic = args.topic || fail('--topic=T is required');
  const n = parseInt(args.n || '100', 10);
  const codec = args.codec === 'gzip' ? CompressionTypes.GZIP : CompressionTypes.None;
  // --sasl=MECHANISM:USER:PASSWORD (plain, scram-sha-256, scram-sha-512)
  // for a broker with --sasl-users-file.
  const sasl = args.sasl ? (([mechanism, username, ...pw]) =>
    ({ mechanism, username, password: pw.join(':') }))(args.sasl.split(':')) : undefined;
  // --ssl-ca=FILE: the listener speaks TLS; verify it against this CA.
  const ssl = args['ssl-ca'] ? { ca: [fs.readFileSync(args['ssl-ca'])], rejectUnauthorized: true }
                             : undefined;
  const kafka = new Kafka({ clientId: 'keel-kafkajs-test', brokers, logLevel: logLevel.WARN,
                            retry: { retries: 10 }, sasl, ssl });

  if (args.follow) return follow(kafka, topic);
  const admin = kafka.admin();
  await admin.connect();
  if (args.create) {
    const made = await admin.createTopics({ waitForLeaders: true,
                                            topics: [{ topic, numPartitions: parseInt(args.create, 10),
                                                       replicationFactor: 1 }] });
    if (!made) fail('createTopics: topic ' + topic + ' already existed');
  }
  const md = await admin.fetchTopicMetadata({ topics: [topic] });
  if (md.topics.length !== 1 || md.topics[0].partitions.length < 1)
    fail('metadata for ' + topic + ': ' + JSON.stringify(md));

  const producer = kafka.producer({ allowAutoTopicCreation: false });
  await producer.connect();
  const offsets = [];
  for (let i = 0; i < n; i += 10) { // batches of 10 in one request
    const messages = [];
    for (let j = i; j < Math.min(n, i + 10); j++)
      messages.push({ key: 'k' + j, value: 'kafkajs-' + j, partition: 0 });
    const res = await producer.send({ topic, acks: -1, compression: codec, messages });
    if (res.length !== 1 || res[0].errorCode !== 0)
      fail('send ' + i + ': ' + JSON.stringify(res));
    const base = BigInt(res[0].baseOffset);
    if (offsets.length && base !== offsets[offsets.length - 1] + 1n)
      fail('send ' + i + ': base offset ' + base + ' not dense after ' + offsets[offsets.length - 1]);
    for (let j = 0; j < messages.length; j++) offsets.push(base + BigInt(j));
  }
  await producer.disconnect();

  const listed = await admin.fetchTopicOffsets(topic);
  const p0 = listed.find((p) => p.partition === 0);
  if (BigInt(p0.high) !== offsets[n - 1] + 1n)
    fail('high watermark ' + p0.high + ', expected ' + (offsets[n - 1] + 1n));
  await admin.disconnect();

  // kafkajs reads only through a consumer group (consumer.run); the
  // caller reads the partition back with kcat and compares it with the
  // offsets printed here.
  console.log('kafkajs ok produced=' + n + ' first=' + offsets[0] + ' last=' + offsets[n - 1]);
}

async function follow(kafka, topic) {
  const producer = kafka.producer({ allowAutoTopicCreation: false,
                                    retry: { retries: 30, initialRetryTime: 300, maxRetryTime: 3000 } });
  await producer.connect();
  const send = async (value) => {
    const res = await producer.send({ topic, acks: -1, messages: [{ value, partition: 0 }] });
    if (res.length !== 1 || res[0].errorCode !== 0) fail('send ' + value + ': ' + JSON.stringify(res));
    return res[0].baseOffset;
  };
  console.log('before ok offset=' + await send('kafkajs-before'));
  await new Promise((resolve) => process.stdin.once('data', resolve));
  console.log('after ok offset=' + await send('kafkajs-after'));
  await producer.disconnect();
  process.exit(0);
}

main().catch((e) => fail(e.stack || String(e)));
