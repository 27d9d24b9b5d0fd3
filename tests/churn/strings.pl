#!/usr/bin/perl
# Churn program: a large string built from a fixed generator, regexes,
# substitutions, tr and a word-count hash over it, round after round, with
# short pauses (when memory may be evicted) and MD5s of everything.
#   strings.pl [ROUNDS] [MIB]
use strict;
use warnings;
use Digest::MD5 qw(md5_hex);
use Time::HiRes qw(sleep);

my $rounds = shift // 6;
my $mib = shift // 2;

my $x = 12345;
sub rnd { $x = ($x * 1103515245 + 12345) % 2147483648; return $x >> 8; }

my @alpha = ('a' .. 'z', 'a' .. 'e', 'a' .. 'e', '0' .. '9', ' ', ' ', ' ', "\n");
my $big = '';
my $chunk = '';
while (length($big) < $mib * 1024 * 1024) {
	$chunk = join('', map { $alpha[rnd() % @alpha] } 1 .. 4096);
	$big .= $chunk;
}
my $start = md5_hex($big);
print "built ", length($big), " bytes ", $start, "\n";

for my $r (1 .. $rounds) {
	my $s = $big;    # a copy to work on
	my $vowels = () = $s =~ /[aeiou]{3,}/g;
	(my $t = $s) =~ s/(\w)(\d)/$2$1/g;
	my $digits = ($t =~ tr/0-9//);
	my %count;
	$count{$_}++ for grep { length } split /\s+/, substr($s, ($r * 7919) % 100000, 1024 * 1024);
	my ($top, $n) = ('', 0);
	for (sort keys %count) { ($top, $n) = ($_, $count{$_}) if $count{$_} > $n; }
	sleep(0.05);
	my $m1 = md5_hex($t);
	sleep(0.05);
	$s =~ s/([a-e]+)([f-k]+)/$2.uc($1)/ge;
	my $m2 = md5_hex($s);
	my $kv = md5_hex(join ',', map { "$_=$count{$_}" } sort keys %count);
	printf "round %d: vowels %d digits %d words %d top %s %d md5 %s %s %s\n",
		$r, $vowels, $digits, scalar(keys %count), $top, $n, $m1, $m2, $kv;
	$big .= substr($t, 0, 65536);
}
print "end ", md5_hex($big), ($start eq md5_hex(substr($big, 0, $mib * 1024 * 1024)) ? " start kept" : " START CHANGED"), "\n";
