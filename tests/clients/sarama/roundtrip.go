// roundtrip: sarama (Shopify's Go Kafka client) against keel brokers.
// Produces -n keyed records to one partition with acks=all through a
// SyncProducer, then consumes that partition from the oldest offset and
// checks every record came back once, in order, at the offset the producer
// was told. Prints one line "sarama ok produced=N consumed=N first=O last=O".
// Exits 1 with a reason on any mismatch.
//
// With -follow it instead produces one record "sarama-before", prints
// "before ok offset=O", waits for a line on stdin (the test kills the
// partition's leader meanwhile), produces "sarama-after" through the same
// producer, which must follow the metadata to the new leader, and prints
// "after ok offset=O".
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/Shopify/sarama"
)

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "sarama: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	brokers := flag.String("brokers", "127.0.0.1:9092", "bootstrap brokers, comma-separated")
	topic := flag.String("topic", "", "topic")
	n := flag.Int("n", 100, "records to produce")
	codec := flag.String("codec", "none", "none|gzip|snappy|lz4|zstd")
	follow := flag.Bool("follow", false, "produce, wait for stdin, produce again after a leader change")
	flag.Parse()
	if *topic == "" {
		fail("--topic is required")
	}

	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_1_0_0
	cfg.ClientID = "keel-sarama-test"
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Producer.Retry.Max = 10
	cfg.Metadata.Retry.Max = 20
	cfg.Metadata.Retry.Backoff = 250 * time.Millisecond
	switch *codec {
	case "none":
		cfg.Producer.Compression = sarama.CompressionNone
	case "gzip":
		cfg.Producer.Compression = sarama.CompressionGZIP
	case "snappy":
		cfg.Producer.Compression = sarama.CompressionSnappy
	case "lz4":
		cfg.Producer.Compression = sarama.CompressionLZ4
	case "zstd":
		cfg.Producer.Compression = sarama.CompressionZSTD
	default:
		fail("unknown codec %q", *codec)
	}
	addrs := strings.Split(*brokers, ",")

	if *follow {
		cfg.Producer.Retry.Max = 120
		cfg.Producer.Retry.Backoff = 250 * time.Millisecond
	}
	prod, err := sarama.NewSyncProducer(addrs, cfg)
	if err != nil {
		fail("producer: %v", err)
	}
	if *follow {
		followLeader(prod, *topic)
		return
	}
	offsets := make([]int64, *n)
	for i := 0; i < *n; i++ {
		msg := &sarama.ProducerMessage{
			Topic:     *topic,
			Partition: 0,
			Key:       sarama.StringEncoder(fmt.Sprintf("k%d", i)),
			Value:     sarama.StringEncoder(fmt.Sprintf("sarama-%d", i)),
		}
		part, off, err := prod.SendMessage(msg)
		if err != nil {
			fail("send %d: %v", i, err)
		}
		if part != 0 {
			fail("send %d went to partition %d", i, part)
		}
		if i > 0 && off <= offsets[i-1] {
			fail("send %d: offset %d not after %d", i, off, offsets[i-1])
		}
		offsets[i] = off
	}
	if err := prod.Close(); err != nil {
		fail("producer close: %v", err)
	}

	cons, err := sarama.NewConsumer(addrs, cfg)
	if err != nil {
		fail("consumer: %v", err)
	}
	pc, err := cons.ConsumePartition(*topic, 0, sarama.OffsetOldest)
	if err != nil {
		fail("consume partition: %v", err)
	}
	got := 0
	deadline := time.After(60 * time.Second)
	for got < *n {
		select {
		case m := <-pc.Messages():
			want := fmt.Sprintf("sarama-%d", got)
			if string(m.Value) != want || string(m.Key) != fmt.Sprintf("k%d", got) {
				fail("record %d: key %q value %q, want value %q", got, m.Key, m.Value, want)
			}
			if m.Offset != offsets[got] {
				fail("record %d at offset %d, producer was told %d", got, m.Offset, offsets[got])
			}
			got++
		case e := <-pc.Errors():
			fail("consume: %v", e)
		case <-deadline:
			fail("consumed %d of %d before the deadline", got, *n)
		}
	}
	pc.Close()
	cons.Close()
	fmt.Printf("sarama ok produced=%d consumed=%d first=%d last=%d\n", *n, got, offsets[0], offsets[*n-1])
}

func followLeader(prod sarama.SyncProducer, topic string) {
	send := func(value string) int64 {
		_, off, err := prod.SendMessage(&sarama.ProducerMessage{
			Topic: topic, Partition: 0, Value: sarama.StringEncoder(value)})
		if err != nil {
			fail("send %s: %v", value, err)
		}
		return off
	}
	fmt.Printf("before ok offset=%d\n", send("sarama-before"))
	buf := make([]byte, 1)
	if _, err := os.Stdin.Read(buf); err != nil {
		fail("stdin: %v", err)
	}
	fmt.Printf("after ok offset=%d\n", send("sarama-after"))
	if err := prod.Close(); err != nil {
		fail("producer close: %v", err)
	}
}
